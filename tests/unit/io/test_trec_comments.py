"""Qrels and run files with comment lines (first non-blank character `#`) read as trec_eval 10.0 reads them:
the comments are skipped, a `#` inside a field is data, and errors still name the file's own line numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from retbench.errors import InputError
from retbench.io.trec import read_qrels, read_run

QRELS = "301 0 CR93E-10279 0\n301 0 CR#93E-1860 1\n302 0 FT921-5 2\n"
RUN = "301 Q0 CR#93E-1860 1 2.5 tag\n301 Q0 CR93E-10279 2 1.5 tag\n302 Q0 FT921-5 1 0.5 tag\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("sep", [" ", "\t"])
def test_qrels_comment_lines_are_skipped_wherever_they_stand(tmp_path, sep):
    plain = read_qrels(_write(tmp_path, "plain", QRELS.replace(" ", sep))).to_dict()
    lines = QRELS.replace(" ", sep).splitlines(keepends=True)
    # as trec_eval 10.0's test/qrels.test.with-comments: at the top, between judgements, and one with four fields
    commented = ["# comment here\n", lines[0], "# 301 0 CR93E-1282 1\n", lines[1], "#and comment here\n", lines[2]]
    got = read_qrels(_write(tmp_path, "commented", "".join(commented)))
    assert got.to_dict() == plain == {"301": {"CR93E-10279": 0, "CR#93E-1860": 1}, "302": {"FT921-5": 2}}
    assert "#" not in got  # no query named "#" came from the comment that has a judgement's four fields


def test_run_comment_lines_are_skipped_indented_or_not(tmp_path):
    plain = read_run(_write(tmp_path, "plain", RUN))
    lines = RUN.splitlines(keepends=True)
    text = "# run made by hand\n" + lines[0] + "   # 301 Q0 CR93E-1282 3 1.0 tag\n" + "".join(lines[1:])
    got = read_run(_write(tmp_path, "commented", text))
    assert got.query_ids == plain.query_ids == ["301", "302"]
    assert got.docs("301") == plain.docs("301") == ["CR#93E-1860", "CR93E-10279"]
    assert got.name == "tag"


def test_a_bad_line_after_comments_is_named_by_its_line_in_the_file(tmp_path):
    path = _write(tmp_path, "qrels", "# one\n# two\n301 0 d1 1\n301 0 d2\n")
    with pytest.raises(InputError, match="expected 4 columns") as err:
        read_qrels(path)
    assert err.value.line == 4
