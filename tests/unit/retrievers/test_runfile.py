"""Run files as systems: a TREC run or JSONL system outputs written from a real BM25 run on SciFact
must evaluate exactly as the system that produced them; unanswered queries count as missing."""

from __future__ import annotations

import json

import pytest
import yaml

from retbench.errors import ConfigError, InputError
from retbench.io.trec import write_run
from retbench.results import read_results
from retbench.retrievers.base import create
from stores_support import SCIFACT, SLICE, scifact_slice

BM25 = {"k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en", "stemmer": "english"}


@pytest.fixture(scope="module")
def bm25_run():
    corpus, queries, _ = scifact_slice()
    r = create("bm25s", BM25, name="bm25")
    r.index(corpus)
    return r.search(queries, 20)


def _experiment(tmp_path, systems):
    from retbench.studies.benchmark import load_config, run_experiment

    cfg = {
        "name": "runfile",
        "output": str(tmp_path / "out"),
        "depth": 20,
        "metrics": ["ndcg@10", "recall@20", "map"],
        "datasets": [{"path": SCIFACT, **SLICE}],
        "systems": systems,
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    run_experiment(load_config(tmp_path / "cfg.yaml"), log=lambda m: None)
    return {s.name: {**s.means(), "coverage": s.coverage} for s in read_results(tmp_path / "out")}


def test_trec_run_file_evaluates_like_its_system(tmp_path, bm25_run):
    path = tmp_path / "bm25.trec"
    write_run(bm25_run, path)
    metrics = _experiment(
        tmp_path,
        [
            {"name": "bm25", "adapter": "bm25s", "params": BM25},
            {"name": "from-file", "adapter": "runfile", "params": {"path": str(path)}},
        ],
    )
    for m in ("ndcg@10", "recall@20", "map"):
        assert metrics["from-file"][m] == metrics["bm25"][m]
    assert metrics["from-file"]["coverage"]["missing"] == 0 and metrics["bm25"]["ndcg@10"] > 0.5


def test_unanswered_queries_are_missing_not_empty(tmp_path, bm25_run):
    _, queries, _ = scifact_slice()
    dropped = list(queries)[:3]
    path = tmp_path / "partial.trec"
    write_run(bm25_run, path, query_ids=[q for q in bm25_run.query_ids if q not in dropped])
    r = create("runfile", {"path": str(path)}, name="partial")
    run = r.search(queries, 10)
    assert [q for q in queries if q not in run] == dropped and r.unanswered == dropped
    metrics = _experiment(tmp_path, [{"name": "partial", "adapter": "runfile", "params": {"path": str(path)}}])
    assert metrics["partial"]["coverage"]["missing"] == 3


def test_jsonl_outputs_with_texts_and_bare_ids(tmp_path, bm25_run):
    corpus, queries, _ = scifact_slice()
    full, bare = tmp_path / "outputs.jsonl", tmp_path / "ids.jsonl"
    with open(full, "w") as f, open(bare, "w") as g:
        for q in bm25_run.query_ids:
            ranked = bm25_run.ranking(q)
            items = [{"id": d, "text": corpus[d].text, "score": s} for d, s in ranked]
            f.write(json.dumps({"id": q, "retrieved": items}) + "\n")
            g.write(json.dumps({"id": q, "retrieved": [d for d, _ in ranked]}) + "\n")
    r = create("runfile", {"path": str(full)}, name="outputs")
    r.index(corpus)
    run = r.search(queries, 5)
    q0 = next(iter(queries))
    assert run.ranking(q0) == bm25_run.ranking(q0)[:5]
    assert r.texts[run.docs(q0)[0]] == corpus[run.docs(q0)[0]].text
    ids = create("runfile", {"path": str(bare)}).search(queries, 20)
    for q in queries:
        assert ids.docs(q) == bm25_run.docs(q)  # served order kept; scores are n - rank
        assert [s for _, s in ids.ranking(q)] == [float(len(bm25_run.docs(q)) - i) for i in range(len(ids.docs(q)))]


def test_wrong_corpus_and_bad_files(tmp_path, bm25_run):
    corpus, _, _ = scifact_slice()
    other = tmp_path / "other.trec"
    other.write_text("1 Q0 doc-a 1 2.0 x\n1 Q0 doc-b 2 1.0 x\n")
    with pytest.raises(InputError, match="none of the run file's 2 document ids is in the corpus"):
        create("runfile", {"path": str(other)}).index(corpus)
    mixed = tmp_path / "mixed.trec"
    mixed.write_text(f"1 Q0 {corpus.ids[0]} 1 2.0 x\n1 Q0 doc-b 2 1.0 x\n")
    r = create("runfile", {"path": str(mixed)})
    r.index(corpus)
    assert r.describe()["unknown_doc_ids"] == 1
    with pytest.raises(ConfigError, match="run file not found"):
        create("runfile", {"path": str(tmp_path / "nope.trec")})
    broken = tmp_path / "broken.trec"
    broken.write_text("1 Q0 d 1 2.0\n")
    with pytest.raises(InputError, match=r"broken\.trec:1: expected 6 columns"):
        create("runfile", {"path": str(broken)})
