"""A BEIR dataset makes the round trip BEIR folder -> local Hugging Face dataset folder -> `hf:` loader ->
BEIR folder exactly (files made here; no network)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

pytest.importorskip("datasets", reason="the hf extra is not installed (scripts/setup.sh installs it)")

from retbench.io.beir import read_beir, write_beir
from retbench.io.datasets import load_dataset
from retbench.io.hf import write_hf_beir


def tricky_beir(root: Path) -> Path:
    """Ids that look like numbers (with leading zeros), punctuation in ids, Unicode, empty titles, metadata, two splits.

    (Ids with spaces are refused when a dataset is read: a TREC run line could not hold them.)
    """
    docs = [
        {"_id": "007", "title": "", "text": "Zürich café — naïve “quotes”"},
        {
            "_id": "7",
            "title": "Seven",
            "text": "plain text",
            "metadata": {"url": "https://example.org/7", "year": 2020},
        },
        {"_id": "a-b.c", "title": "punctuated", "text": "an id with punctuation"},
        {"_id": "0.50", "title": "float-like", "text": "looks like a number", "metadata": {"tags": ["x", "y"]}},
    ]
    queries = [
        {"_id": "001", "text": "what is 007?", "metadata": {"category": "ids"}},
        {"_id": "2", "text": "a second question"},
        {"_id": "1e3", "text": "exponent-like id"},
    ]
    root.mkdir(parents=True)
    (root / "qrels").mkdir()
    with gzip.open(root / "corpus.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    (root / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n001\t007\t2\n001\t7\t0\n2\ta-b.c\t1\n")
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n1e3\t0.50\t1\n")
    return root


def _same(a, b) -> None:
    assert list(a.corpus.ids) == list(b.corpus.ids)
    assert [a.corpus.title(i) for i in range(len(a.corpus))] == [b.corpus.title(i) for i in range(len(b.corpus))]
    assert list(a.corpus.texts) == list(b.corpus.texts)
    assert dict(a.queries) == dict(b.queries) and a.queries.metadata == b.queries.metadata
    assert {s: q.to_dict() for s, q in a.qrels.items()} == {s: q.to_dict() for s, q in b.qrels.items()}


@pytest.mark.parametrize("source", ["tricky", "scifact"])
def test_a_beir_dataset_round_trips_through_a_local_hugging_face_folder_exactly(source, tmp_path, scifact_path):
    beir = tricky_beir(tmp_path / "beir") if source == "tricky" else scifact_path
    original = read_beir(beir)
    folder = write_hf_beir(original, tmp_path / "hf" / source)
    loaded = load_dataset(f"hf:{folder}")
    _same(original, loaded)
    assert loaded.corpus.joined_texts() == original.corpus.joined_texts()
    # and back to BEIR: the same files as writing the original
    write_beir(original, tmp_path / "ref")
    write_beir(loaded, tmp_path / "back")
    for rel in ["corpus.jsonl", "queries.jsonl", *(f"qrels/{s}.tsv" for s in original.qrels)]:
        assert (tmp_path / "back" / rel).read_bytes() == (tmp_path / "ref" / rel).read_bytes(), rel
    if source == "tricky":
        assert loaded.split("test").to_dict() == {"001": {"007": 2, "7": 0}, "2": {"a-b.c": 1}}
        assert loaded.corpus.metadata[1] == {"url": "https://example.org/7", "year": 2020}


def test_hf_folder_with_a_sibling_qrels_repository_loads_like_the_hub_layout(tmp_path):
    original = read_beir(tricky_beir(tmp_path / "beir"))
    folder = write_hf_beir(original, tmp_path / "mydata")
    (folder / "qrels").rename(tmp_path / "mydata-qrels")  # BeIR/<name> + BeIR/<name>-qrels, as on the hub
    _same(original, load_dataset(f"hf:{folder}", ["test", "dev"]))


def test_a_local_folder_rewritten_in_place_is_read_anew_not_from_the_datasets_cache(tmp_path):
    beir = tricky_beir(tmp_path / "beir")
    original = read_beir(beir)
    folder = write_hf_beir(original, tmp_path / "hf")
    assert next(iter(load_dataset(f"hf:{folder}").corpus.texts)) == "Zürich café — naïve “quotes”"
    corpus = folder / "corpus.jsonl"
    text = corpus.read_text(encoding="utf-8")
    corpus.write_text(text.replace("plain text", "other text"), encoding="utf-8")  # same size, same second
    qrels = folder / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text().replace("\t2\n", "\t1\n"))
    again = load_dataset(f"hf:{folder}")
    assert "other text" in list(again.corpus.texts) and "plain text" not in list(again.corpus.texts)
    assert again.qrels["test"].to_dict()["001"]["007"] == 1
