"""The chunking-set reader: the shipped set, and bad input named by file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repo_paths import CORPORA
from retbench.chunkers import Span
from retbench.errors import InputError
from retbench.io.chunking_eval import read_chunking_eval
from retbench.io.datasets import load_dataset

SHIPPED = CORPORA / "chunking_eval"


def test_shipped_set_reads_with_exact_offsets():
    ev = read_chunking_eval(SHIPPED)
    assert sorted(ev.corpus.ids) == ["chatlogs", "pubmed", "state_of_the_union", "wikitexts"]
    assert len(ev.queries) == 375
    assert sum(len(s) for s in ev.spans.values()) == 647
    # q0 from questions.jsonl: two excerpts of the State of the Union address
    assert ev.spans["q0"] == [Span("state_of_the_union", 27346, 27425), Span("state_of_the_union", 27866, 28023)]
    text = ev.corpus["state_of_the_union"].text
    assert text[27346:27425] == "My administration announced we’re cutting credit card late fees from $32 to $8."
    ds = load_dataset("chunking_eval")
    assert ds.split("test")["q0"] == {"state_of_the_union": 1}


def _write_set(root: Path, lines: list[str], doc: str = "Hello world.\r\nSecond line.") -> Path:
    (root / "corpora").mkdir(parents=True)
    (root / "corpora" / "a.md").write_bytes(doc.encode("utf-8"))
    (root / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def _q(**kw: object) -> str:
    obj = {
        "id": "q1",
        "question": "?",
        "corpus_id": "a",
        "references": [{"content": "Second", "start_index": 14, "end_index": 20}],
    }
    obj.update(kw)
    return json.dumps(obj)


def test_offsets_count_carriage_returns(tmp_path):
    ev = read_chunking_eval(_write_set(tmp_path, [_q()]))
    assert ev.spans["q1"] == [Span("a", 14, 20)]


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ("{not json", None, "malformed JSON"),
        (_q(corpus_id="b"), "corpus_id", "unknown document"),
        (_q(references=[{"content": "Hello", "start_index": 1, "end_index": 6}]), "references[0].content", "differs"),
        (_q(references=[{"start_index": 20, "end_index": 99}]), "references[0]", "outside"),
        (_q(references=[{"start_index": "0", "end_index": 5}]), "start_index", "expected int"),
        (_q(references=[]), "references", "at least one"),
        (json.dumps({"id": "q1", "corpus_id": "a", "references": []}), "question", "missing"),
    ],
)
def test_bad_questions_name_line_and_field(tmp_path, line, field, message):
    root = _write_set(tmp_path, [_q(id="q0"), line])
    with pytest.raises(InputError, match=message) as info:
        read_chunking_eval(root)
    assert info.value.line == 2 and info.value.field == field
    assert info.value.path.endswith("questions.jsonl")


def test_missing_documents_folder(tmp_path):
    (tmp_path / "questions.jsonl").write_text(_q() + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="no documents"):
        read_chunking_eval(tmp_path)
