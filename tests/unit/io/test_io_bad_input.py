"""Every kind of bad input gets one message naming file, line and field, and exit code 2 (no traceback)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retbench.cli import app
from retbench.errors import InputError
from retbench.io.beir import read_beir
from retbench.io.golden import read_golden

runner = CliRunner()


def make_beir(
    root: Path, corpus_lines: list[str], qrels_lines: list[str] | None = None, queries: list[str] | None = None
) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(line + "\n" for line in corpus_lines))
    queries = queries or [
        json.dumps({"_id": "q1", "text": "what is a cell"}),
        json.dumps({"_id": "q2", "text": "gene"}),
    ]
    (root / "queries.jsonl").write_text("".join(q + "\n" for q in queries))
    qrels_lines = qrels_lines if qrels_lines is not None else ["q1\td1\t1"]
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(x + "\n" for x in qrels_lines))
    return root


GOOD = [
    json.dumps({"_id": "d1", "title": "Cells", "text": "A cell is a unit."}),
    json.dumps({"_id": "d2", "text": "Genes."}),
]


def assert_cli_error(path: Path, *needles: str, extra: list[str] | None = None) -> str:
    result = runner.invoke(app, ["datasets", "info", str(path), *(extra or [])])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    for needle in needles:
        assert needle in result.output, (needle, result.output)
    return result.output


def test_good_folder_loads(tmp_path: Path) -> None:
    ds = read_beir(make_beir(tmp_path / "ds", GOOD))
    assert len(ds.corpus) == 2
    assert ds.corpus.joined(0) == "Cells A cell is a unit."
    assert ds.corpus.joined(1) == "Genes."  # a missing title is allowed
    assert ds.split("test")["q1"] == {"d1": 1}


def test_malformed_json_line(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", [GOOD[0], '{"_id": "d2", "text": ', GOOD[1]])
    assert_cli_error(root, "corpus.jsonl:2", "malformed JSON")


def test_missing_id(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", [GOOD[0], json.dumps({"text": "no id"})])
    assert_cli_error(root, "corpus.jsonl:2", "field '_id'", "missing")


def test_duplicate_doc_id(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", [GOOD[0], GOOD[1], json.dumps({"_id": "d1", "text": "again"})])
    out = assert_cli_error(root, "corpus.jsonl:3", "duplicate document id 'd1'")
    assert "line 1" in out


def test_qrels_wrong_column_count(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", GOOD, ["q1\td1\t1", "q2 d2 1"])
    assert_cli_error(root, "test.tsv:3", "3 tab-separated columns")


def test_qrels_non_integer_grade(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", GOOD, ["q1\td1\thigh"])
    assert_cli_error(root, "test.tsv:2", "field 'score'", "'high'")


def test_unknown_ids_reported_then_strict(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", GOOD, ["q1\td1\t1", "q9\td1\t1", "q1\td404\t1", "q2\td405\t0"])
    ds = read_beir(root)
    assert any("1 query not in queries" in p for p in ds.problems)
    assert any("2 judgement(s) name documents not in the corpus" in p for p in ds.problems)
    result = runner.invoke(app, ["datasets", "info", str(root)])
    assert result.exit_code == 0 and "not in the corpus" in result.output
    assert_cli_error(root, "test.tsv", "not in queries", extra=["--strict"])


def test_empty_corpus(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", [])
    assert_cli_error(root, "corpus.jsonl", "corpus is empty")


def test_missing_file_and_split(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", GOOD)
    (root / "queries.jsonl").unlink()
    assert_cli_error(root, "no queries.jsonl")
    root2 = make_beir(tmp_path / "ds2", GOOD)
    with pytest.raises(InputError, match="no qrels for split 'dev' \\(have: test\\)"):
        read_beir(root2, ["dev"])


def test_truncated_gz(tmp_path: Path, scifact_path: Path) -> None:
    root = tmp_path / "trunc"
    shutil.copytree(scifact_path, root)
    data = (root / "corpus.jsonl.gz").read_bytes()
    (root / "corpus.jsonl.gz").write_bytes(data[: len(data) // 2])
    assert_cli_error(root, "corpus.jsonl.gz:", "truncated")


def test_not_gzip(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", GOOD)
    (root / "corpus.jsonl").rename(root / "corpus.jsonl.gz")
    assert_cli_error(root, "corpus.jsonl.gz", "gzip")


def test_golden_wrong_expected_output_type(tmp_path: Path) -> None:
    path = tmp_path / "golden.yaml"
    path.write_text(
        "samples:\n"
        "  - id: q-1\n"
        "    input: {question: 'refund window?'}\n"
        "    expected_output: [doc-3, doc-9]\n"
        "  - id: q-2\n"
        "    input: {question: other}\n"
        "    expected_output: doc-3\n"
    )
    with pytest.raises(InputError) as err:
        read_golden(path)
    msg = str(err.value)
    assert "golden.yaml:5" in msg and "field 'expected_output'" in msg and "got str" in msg


def test_gzip_written_files_are_valid(tmp_path: Path) -> None:
    from retbench.io.files import open_text

    with open_text(tmp_path / "x.jsonl.gz", "wt") as fh:
        fh.write('{"_id": "a", "text": "b"}\n')
        raw = fh.buffer.fileobj  # type: ignore[attr-defined]  # the file the compressed bytes go into
    assert raw.closed  # closed with the text stream, not left to the garbage collector with bytes in its buffer
    assert gzip.decompress((tmp_path / "x.jsonl.gz").read_bytes()) == b'{"_id": "a", "text": "b"}\n'


def test_qrels_judging_a_document_twice_with_different_grades_is_refused_naming_both_lines(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "ds", GOOD, ["q1\td1\t1", "q2\td2\t0", "q1\td1\t2"])
    assert_cli_error(root, "test.tsv:4", "judged twice for query 'q1' with different grades (1 on line 2, 2 on line 4)")


def test_qrels_repeating_a_judgement_with_the_same_grade_is_kept_once_and_counted(tmp_path: Path) -> None:
    ds = read_beir(make_beir(tmp_path / "ds", GOOD, ["q1\td1\t1", "q1\td1\t1"]))
    assert ds.split("test")["q1"] == {"d1": 1}
    assert "test.tsv: 1 line(s) repeat a judgement with the same grade; kept once" in ds.problems


@pytest.mark.parametrize("stem", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_a_file_beside_its_gzipped_twin_is_ambiguous_and_both_are_named(tmp_path: Path, stem: str) -> None:
    root = make_beir(tmp_path / "ds", GOOD)
    with gzip.open(root / f"{stem}.gz", "wb") as fh:
        fh.write((root / stem).read_bytes())
    name = Path(stem).name
    assert_cli_error(root, f"both {name} and {name}.gz are here", "ambiguous")


def test_queries_without_text_are_reported_by_info_and_refused_by_a_run_at_their_line(tmp_path: Path) -> None:
    queries = [json.dumps({"_id": "q1", "text": "what is a cell"}), json.dumps({"_id": "q2", "text": "  "})]
    root = make_beir(tmp_path / "ds", GOOD, ["q1\td1\t1", "q2\td2\t1"], queries)
    result = runner.invoke(app, ["datasets", "info", str(root)])
    assert result.exit_code == 0 and "1 query/queries have no text (first: q2)" in result.output, result.output
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: blank\noutput: {tmp_path / 'out'}\nmetrics: [ndcg@10]\ndatasets: [{{path: {root}}}]\n"
        "systems: [{name: bm25, adapter: bm25s}]\n"
    )
    result = runner.invoke(app, ["run", str(config), "--quiet", "--no-history"])
    assert result.exit_code == 2, result.output
    assert f"{root / 'queries.jsonl'}:2: field 'text': query 'q2' has no text" in result.output
    assert not (tmp_path / "out" / "systems").exists()
