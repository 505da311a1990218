"""Readers and writers: TREC files round-trip byte-stably, BEIR folders round-trip, golden sets parse."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retbench.cli import app
from retbench.data import Qrels, Run
from retbench.io.beir import read_beir, write_beir
from retbench.io.golden import golden_qrels, read_golden
from retbench.io.outputs import read_outputs
from retbench.io.trec import read_qrels, read_run, write_qrels, write_run


def random_run(seed: int) -> Run:
    rng = random.Random(seed)
    results = {}
    for q in range(30):
        docs = rng.sample(range(200), rng.randint(0, 40))
        # ties on purpose: scores from a small set
        results[f"q{q}"] = {f"d{d}": rng.choice([0.5, 1.25, 3.0, rng.random()]) for d in docs}
    return Run.from_dict(results, name="rand")


def test_trec_run_roundtrip_byte_stable(tmp_path: Path) -> None:
    run = random_run(1)
    write_run(run, tmp_path / "a.trec")
    back = read_run(tmp_path / "a.trec")
    write_run(back, tmp_path / "b.trec")
    assert (tmp_path / "a.trec").read_bytes() == (tmp_path / "b.trec").read_bytes()
    nonempty = {q: r for q, r in run.to_dict().items() if r}
    assert back.to_dict() == nonempty
    assert back.name == "rand"


def test_run_keeps_trec_eval_order() -> None:
    run = Run.from_dict({"q": [("a", 1.0), ("c", 2.0), ("b", 1.0), ("z", 1.0)]})
    # score descending, ties by doc id descending (trec_eval's rule)
    assert run.docs("q") == ["c", "z", "b", "a"]


def test_duplicates_first_kept_and_counted() -> None:
    run = Run.from_dict({"q": [("a", 1.0), ("b", 2.0), ("a", 5.0)], "r": [("a", 1.0)]})
    assert run.ranking("q") == [("b", 2.0), ("a", 1.0)]
    assert run.n_duplicates == 1


def test_trec_qrels_roundtrip_byte_stable(tmp_path: Path) -> None:
    text = "".join(f"q{q} 0 d{d} {g}\n" for q in range(5) for d, g in [(3, 1), (1, 2), (7, 0)])
    (tmp_path / "q.txt").write_text(text)
    qrels = read_qrels(tmp_path / "q.txt")
    write_qrels(qrels, tmp_path / "q2.txt")
    assert (tmp_path / "q2.txt").read_text() == text
    assert qrels["q0"] == {"d3": 1, "d1": 2, "d7": 0}
    assert qrels.relevant("q0", 2) == {"d1"}


def test_beir_folder_roundtrip(tmp_path: Path, scifact) -> None:
    small = scifact.corpus.subset(scifact.corpus.ids[:50])
    qrels = {"test": Qrels({q: d for q, d in scifact.split("test").items() if all(x in small for x in d)})}
    ds = type(scifact)("mini", small, scifact.queries.subset(qrels["test"]), qrels)
    write_beir(ds, tmp_path / "mini", compress=True)
    back = read_beir(tmp_path / "mini")
    assert list(back.corpus.ids) == list(small.ids)
    assert back.corpus.joined_texts() == small.joined_texts()
    assert back.corpus.fingerprint() == small.fingerprint()
    assert dict(back.queries) == dict(ds.queries)
    assert back.split("test").to_dict() == qrels["test"].to_dict()
    write_beir(back, tmp_path / "again", compress=True)
    for f in ("corpus.jsonl.gz", "queries.jsonl.gz", "qrels/test.tsv"):
        assert (tmp_path / "mini" / f).read_bytes() == (tmp_path / "again" / f).read_bytes()


def test_golden_yaml_and_outputs(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(
        "samples:\n"
        "  - id: q-1\n"
        "    input: {question: 'What is our refund window?'}\n"
        "    expected_output: [doc-3, doc-9]\n"
        "    metadata: {k: 5, tags: [billing], answer: '30 days'}\n"
        "  - id: q-2\n"
        "    input: other question\n"
        "    expected_output: {doc-3: 3, doc-9: 1}\n"
        "    metadata: {category: multi_hop, required_support_groups: [[doc-3], [doc-9, doc-4]]}\n"
    )
    samples = read_golden(tmp_path / "g.yaml")
    assert [s.id for s in samples] == ["q-1", "q-2"]
    assert samples[0].expected == {"doc-3": 1, "doc-9": 1} and samples[0].k == 5 and samples[0].tags == ["billing"]
    assert samples[0].input == "What is our refund window?" and samples[0].answer == "30 days"
    assert samples[1].expected == {"doc-3": 3, "doc-9": 1}
    assert samples[1].support_groups == [["doc-3"], ["doc-9", "doc-4"]]
    assert golden_qrels(samples)["q-2"] == {"doc-3": 3, "doc-9": 1}

    lines = [
        {"id": "q-1", "retrieved": [{"id": "doc-7", "text": "seven"}, {"id": "doc-3", "text": "three"}]},
        {"id": "q-2", "retrieved": ["doc-9", "doc-1", "doc-3"]},
    ]
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = read_outputs(tmp_path / "out.jsonl")
    assert out.run.docs("q-1") == ["doc-7", "doc-3"]
    assert out.run.docs("q-2") == ["doc-9", "doc-1", "doc-3"]  # rank order survives the score sort
    assert out.texts == {"doc-7": "seven", "doc-3": "three"}


def test_golden_jsonl_line_numbers(tmp_path: Path) -> None:
    from retbench.errors import InputError

    good = {"id": "a", "input": "x", "expected_output": ["d"]}
    bad = {"id": "b", "input": "y", "expected_output": {"d": "high"}}
    (tmp_path / "g.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(InputError, match=r"g\.jsonl:2: field 'expected_output': gain for 'd' must be an integer"):
        read_golden(tmp_path / "g.jsonl")


def test_datasets_info_scifact() -> None:
    result = CliRunner().invoke(app, ["datasets", "info", "scifact", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["documents"] == 5183 and info["queries"] == 1109
    assert info["splits"]["test"]["queries"] == 300 and info["splits"]["test"]["judgements"] == 339
    assert info["splits"]["train"]["judgements"] == 919
    assert info["splits"]["test"]["grades"] == {"1": 339}
    assert info["problems"] == []


def test_hf_local_parquet_matches_beir(tmp_path: Path, scifact) -> None:
    pytest.importorskip("datasets")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from retbench.io.hf import load_hf_files

    n = 300
    c = scifact.corpus
    pq.write_table(
        pa.table({"_id": list(c.ids[:n]), "title": [c.title(i) for i in range(n)], "text": list(c.texts[:n])}),
        tmp_path / "corpus.parquet",
    )
    qids = list(scifact.queries)[:20]
    pq.write_table(pa.table({"_id": qids, "text": [scifact.queries[q] for q in qids]}), tmp_path / "queries.parquet")
    (tmp_path / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\t31715818\t1\n3\t14717500\t1\n")
    ds = load_hf_files(tmp_path / "corpus.parquet", tmp_path / "queries.parquet", {"test": tmp_path / "test.tsv"})
    assert len(ds.corpus) == n
    assert type(ds.corpus.texts).__name__ == "ArrowColumn"  # stays in Arrow, converted lazily
    assert [ds.corpus.joined(i) for i in range(n)] == [c.joined(i) for i in range(n)]
    assert ds.corpus["4983"].title == c["4983"].title
    assert list(ds.queries) == qids
    assert ds.split("test").to_dict() == {"1": {"31715818": 1}, "3": {"14717500": 1}}
    assert np.array_equal(np.array(list(ds.corpus.ids)), np.array(list(c.ids[:n])))
