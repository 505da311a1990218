"""Fusion functions on worked examples, fused Runs, and the hybrid retriever over real components."""

from __future__ import annotations

import numpy as np
import pytest

from retbench.data import Corpus, QueryStatus, Run, RunBuilder
from retbench.errors import ConfigError
from retbench.retrievers import CapabilityError, create
from retbench.retrievers.fusion import fuse_rrf, fuse_weighted, normalize_scores
from retbench.retrievers.hybrid import HybridRetriever, fuse_runs

A = [("a", 10.0), ("b", 5.0), ("c", 0.0)]  # BM25-like scale
B = [("c", 0.9), ("a", 0.5), ("d", 0.1)]  # cosine-like scale


# -- fusion functions --------------------------------------------------------------------------
def test_rrf_worked_example():
    fused = dict(fuse_rrf([A, B]))
    assert fused == pytest.approx({"a": 1 / 61 + 1 / 62, "b": 1 / 62, "c": 1 / 63 + 1 / 61, "d": 1 / 63})
    assert [d for d, _ in fuse_rrf([A, B])] == ["a", "c", "b", "d"]
    assert [d for d, _ in fuse_rrf([A, B], k=2)] == ["a", "c"]
    # weights scale each component's reciprocal ranks; depth cuts a component before fusion
    assert dict(fuse_rrf([A, B], weights=[1, 3]))["d"] == pytest.approx(3 / 63)
    assert "d" not in dict(fuse_rrf([A, B], depth=2))
    assert dict(fuse_rrf([A, B], rrf_k=0))["a"] == pytest.approx(1 + 1 / 2)


def test_rrf_ties_break_by_doc_id_descending_like_trec_eval():
    assert fuse_rrf([[("x", 1.0)], [("y", 1.0)]]) == [("y", 1 / 61), ("x", 1 / 61)]


def test_rrf_counts_a_repeated_doc_once_per_component():
    assert dict(fuse_rrf([[("a", 3.0), ("a", 2.0), ("b", 1.0)]])) == pytest.approx({"a": 1 / 61, "b": 1 / 62})


def test_weighted_minmax_worked_example():
    # A -> a 1, b .5, c 0;  B -> c 1, a .5, d 0;  missing docs contribute 0
    assert dict(fuse_weighted([A, B])) == pytest.approx({"a": 1.5, "b": 0.5, "c": 1.0, "d": 0.0})
    got = dict(fuse_weighted([A, B], weights=[0.3, 0.7]))
    assert got == pytest.approx({"a": 0.3 + 0.35, "b": 0.15, "c": 0.7, "d": 0.0})


def test_weighted_zscore_gives_missing_docs_the_component_minimum():
    # X: a=3, b=1 -> z = +1, -1.  Y: c=2, a=2 -> zero spread -> 0, 0.
    x, y = [("a", 3.0), ("b", 1.0)], [("c", 2.0), ("a", 2.0)]
    fused = fuse_weighted([x, y], normalization="zscore")
    # b is missing from Y: gets Y's minimum (0); c is missing from X: gets X's minimum (-1)
    assert dict(fused) == pytest.approx({"a": 1.0, "b": -1.0, "c": -1.0})
    assert [d for d, _ in fused] == ["a", "c", "b"]  # tie between b and c: doc id descending


def test_weighted_rank_normalization():
    assert normalize_scores([9.0, 7.0, 1.0, 0.5], "rank").tolist() == [1.0, 0.75, 0.5, 0.25]
    assert dict(fuse_weighted([A, B], normalization="rank")) == pytest.approx(
        {"a": 1 + 2 / 3, "b": 2 / 3, "c": 1 / 3 + 1, "d": 1 / 3}
    )


def test_normalization_edge_cases():
    # ranx's rule: the spread is floored at 1e-9, so all-equal scores give 0 (the system adds nothing)
    assert normalize_scores([4.0, 4.0], "minmax").tolist() == [0.0, 0.0]
    assert normalize_scores([4.0, 4.0], "zscore").tolist() == [0.0, 0.0]
    assert normalize_scores([], "minmax").tolist() == []
    with pytest.raises(ValueError, match="normalization"):
        normalize_scores([1.0], "softmax")


@pytest.mark.parametrize("normalization", ["minmax", "zscore", "rank"])
def test_weighted_fusion_ignores_each_components_scale(normalization):
    """Raw scores are never mixed: rescaling one component (BM25 x 1000 + 7) changes nothing."""
    scaled = [(d, 1000 * s + 7) for d, s in A]
    plain, rescaled = (
        fuse_weighted([A, B], normalization=normalization),
        fuse_weighted([scaled, B], normalization=normalization),
    )
    assert [d for d, _ in plain] == [d for d, _ in rescaled]
    assert [s for _, s in plain] == pytest.approx([s for _, s in rescaled])


def test_fuse_runs_keeps_failures_and_fuses_partial_coverage():
    one = RunBuilder("bm25")
    one.add("q1", A)
    one.add("q2", status=QueryStatus.ERROR, error="TimeoutError: 30s")
    one.add("q3", [("z", 1.0)])
    two = Run.from_dict({"q1": dict(B), "q2": {"a": 1.0}}, name="dense")
    fused = fuse_runs([one.build(), two], "rrf")
    assert fused.query_ids == ["q1", "q2", "q3"]
    assert fused.docs("q1") == ["a", "c", "b", "d"]
    assert fused.status["q2"] is QueryStatus.ERROR and "bm25: TimeoutError: 30s" in fused.errors["q2"]
    assert fused.docs("q3") == ["z"]
    assert fuse_runs([one.build(), two], "weighted", normalization="minmax").ranking("q1")[0] == ("a", 1.5)


# -- retriever ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def docs(scifact) -> Corpus:
    return scifact.corpus.subset(scifact.corpus.ids[:120])


@pytest.fixture(scope="module")
def claims(scifact, docs) -> list[str]:
    qrels = scifact.split("test")
    return [scifact.queries[q] for q in qrels if set(qrels[q]) & set(docs.ids)][:12]


@pytest.fixture(scope="module")
def components(tmp_path_factory) -> list[dict]:
    cache = tmp_path_factory.getbasetemp() / "retbench-embeddings"  # shared with test_dense
    return [
        {"adapter": "bm25s", "depth": 30},
        {"adapter": "dense", "params": {"max_seq_length": 64, "cache_dir": str(cache)}, "depth": 20},
    ]


@pytest.fixture(scope="module")
def hybrid(components, docs) -> HybridRetriever:
    r = create("hybrid", {"components": components}, name="bm25+minilm")
    assert isinstance(r, HybridRetriever)
    r.index(docs)
    return r


def test_hybrid_equals_rrf_over_its_components_at_their_depths(hybrid, claims):
    bm25, dense = hybrid.components
    assert (bm25.name, dense.name, hybrid.depths) == ("bm25s", "dense", [30, 20])
    got = hybrid.search_batch(claims, 10)
    for i, ranking in enumerate(got):
        want = fuse_rrf([bm25.search_batch(claims, 30)[i], dense.search_batch(claims, 20)[i]], k=10)
        assert ranking == want
        assert len(ranking) == 10 and all(type(d) is str and type(s) is float for d, s in ranking)


def test_hybrid_weighted_search_and_describe(components, docs, claims):
    r = create(
        "hybrid", {"components": components, "fusion": "weighted", "normalization": "zscore", "weights": [0.4, 0.6]}
    )
    r.index(docs)
    bm25, dense = r.components
    ranking = r.search_batch(claims[:1], 5)[0]
    want = fuse_weighted(
        [bm25.search_batch(claims[:1], 30)[0], dense.search_batch(claims[:1], 20)[0]],
        weights=[0.4, 0.6],
        normalization="zscore",
        k=5,
    )
    assert ranking == want
    desc = r.describe()
    assert desc["fusion"] == "weighted" and desc["normalization"] == "zscore" and "rrf_k" not in desc
    assert [(c["adapter"], c["depth"], c["weight"]) for c in desc["components"]] == [
        ("bm25s", 30, 0.4),
        ("dense", 20, 0.6),
    ]


def test_hybrid_run_and_save_load(hybrid, claims, components, tmp_path):
    from retbench.data import Queries

    run = hybrid.search(Queries({f"q{i}": c for i, c in enumerate(claims)}), 10)
    assert run.name == "bm25+minilm" and not run.failed()
    assert hybrid.capabilities == {"add", "delete", "save", "load"}
    hybrid.save(tmp_path / "h")
    assert {p.name for p in (tmp_path / "h").iterdir()} == {"bm25s", "dense", "hybrid.json"}
    again = create("hybrid", {"components": components})
    again.load(tmp_path / "h")
    assert again.search_batch(claims, 10) == hybrid.search_batch(claims, 10)
    assert again.fingerprint() == hybrid.fingerprint()


def test_hybrid_add_delete_reach_every_component(components, docs):
    r = create("hybrid", {"components": components})
    r.index(docs.subset(docs.ids[:100]))
    r.add(docs.subset(docs.ids[100:]))
    assert [len(c) for c in r.components] == [120, 120]
    r.delete(docs.ids[:3])
    assert [len(c) for c in r.components] == [117, 117]


def test_capabilities_are_the_intersection():
    r = create("hybrid", {"components": [{"adapter": "bm25s"}, {"adapter": "rank_bm25"}]})
    assert r.capabilities == {"add", "delete"}
    with pytest.raises(CapabilityError, match="rank_bm25"):
        r.save("/nonexistent")


def test_component_names_are_made_unique():
    r = create("hybrid", {"components": [{"adapter": "bm25s"}, {"adapter": "bm25s", "params": {"k1": 0.9}}]})
    assert [c.name for c in r.components] == ["bm25s-1", "bm25s-2"]
    r.index(Corpus(["a", "b"], ["apple pie", "banana bread"]))
    assert r.search_batch(["banana"], 5)[0][0][0] == "b"


def test_bad_hybrid_configs_are_config_errors():
    with pytest.raises(ConfigError, match="adapter"):
        create("hybrid", {"components": [{"params": {}}]})
    with pytest.raises(ConfigError, match="unknown keys"):
        create("hybrid", {"components": [{"adapter": "bm25s", "wieght": 2}]})
    with pytest.raises(ConfigError, match="unknown parameter 'k3'"):
        create("hybrid", {"components": [{"adapter": "bm25s", "params": {"k3": 1}}]})
    with pytest.raises(ConfigError, match="fusion"):
        create("hybrid", {"components": [{"adapter": "bm25s"}], "fusion": "mean"})
    with pytest.raises(ConfigError, match="weights"):
        create("hybrid", {"components": [{"adapter": "bm25s"}], "weights": [1, 2]})
    with pytest.raises(ConfigError, match="at least one"):
        create("hybrid", {"components": []})


def test_fused_scores_are_finite(hybrid, claims):
    scores = [s for ranking in hybrid.search_batch(claims, 50) for _, s in ranking]
    assert np.all(np.isfinite(scores)) and min(scores) > 0
