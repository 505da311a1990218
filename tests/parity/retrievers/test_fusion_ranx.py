"""Every fusion method and normalisation gives the scores `ranx.fuse` gives, on the same runs.

The runs are generated: 3 systems x 25 queries, each system returning a random subset of a shared pool at its
own depth (so documents are missing from some systems), with distinct scores (ranx orders ties arbitrarily, so a
tie would make rank-based inputs differ). A second set uses real BM25 and dense-like score scales (negative and
positive scores, different ranges). The comparison is per query and per document on the fused *scores*
(ranx's order among equal fused scores is unspecified; retbench breaks them by doc id, checked separately).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

ranx = pytest.importorskip("ranx")

from retbench.data import RunBuilder  # noqa: E402
from retbench.retrievers.fusion import fuse  # noqa: E402
from retbench.retrievers.fusion_options import FUSION_ALIASES, FUSIONS, RANK_BASED, WEIGHTED  # noqa: E402
from retbench.retrievers.hybrid import fuse_runs  # noqa: E402

# ranx's name for each method ('weighted' is retbench's own: it differs from wsum only in missing documents)
RANX_NAME = {m: m for m in FUSIONS if m != "weighted"} | {v: k for k, v in FUSION_ALIASES.items()}
RANX_NORMS = {"minmax": "min-max", "max": "max", "sum": "sum", "zscore": "zmuv", "rank": "rank", "borda": "borda"}
WEIGHTS = [0.45, 0.35, 0.2]  # no subset of these sums to another: weighted Condorcet has no tied votes
PARAMS = {"combgmnz": ("gamma", 0.7), "logn_isr": ("sigma", 0.05), "rbc": ("phi", 0.9)}


def make_runs(
    seed: int, scale: tuple[float, float, float] = (1.0, 1.0, 1.0), shift: float = -5.0
) -> list[dict[str, dict[str, float]]]:
    """Random runs; system 1's scores are shifted by `shift` (negative scores, as from a z-scored model)."""
    rng = np.random.default_rng(seed)
    runs: list[dict[str, dict[str, float]]] = [{}, {}, {}]
    for q in range(25):
        pool = [f"d{q}-{i}" for i in range(40)]
        for s, run in enumerate(runs):
            depth = int(rng.integers(1, 30))
            docs = rng.choice(pool, size=depth, replace=False)
            scores = np.sort(rng.random(depth))[::-1] * scale[s] + (shift if s == 1 else 0.0)
            run[f"q{q}"] = {str(d): float(x) for d, x in zip(docs, scores, strict=True)}
    return runs


def ranx_fused(runs: list[dict[str, dict[str, float]]], method: str, norm: str | None) -> dict[str, dict[str, float]]:
    params: dict[str, object] = {}
    if method in WEIGHTED and method not in ("rrf", "weighted"):
        params["weights"] = WEIGHTS
    if method in PARAMS:
        params[PARAMS[method][0]] = PARAMS[method][1]
    fused = ranx.fuse([ranx.Run(r) for r in runs], norm=norm, method=RANX_NAME[method], params=params)
    return {q: dict(docs) for q, docs in fused.to_dict().items()}


def ours(runs: list[dict[str, dict[str, float]]], method: str, norm: str) -> dict[str, dict[str, float]]:
    out = {}
    for q in runs[0]:
        rankings = [sorted(r[q].items(), key=lambda kv: -kv[1]) for r in runs]
        weights = WEIGHTS if method in WEIGHTED and method not in ("rrf", "weighted") else None
        param = PARAMS[method][1] if method in PARAMS else None
        out[q] = dict(fuse(rankings, method, normalization=norm, weights=weights, param=param))
    return out


def assert_same_scores(got: dict[str, dict[str, float]], want: dict[str, dict[str, float]]) -> None:
    assert got.keys() == want.keys()
    for q in want:
        assert got[q].keys() == want[q].keys(), q
        for d, x in want[q].items():
            assert got[q][d] == pytest.approx(x, rel=1e-12, abs=1e-12), (q, d)


SCORE_METHODS = [m for m in FUSIONS if m not in RANK_BASED and m != "weighted"]


@pytest.mark.parametrize(("method", "norm"), list(itertools.product(SCORE_METHODS, sorted(RANX_NORMS))))
def test_each_score_based_fusion_under_each_normalisation_equals_ranx(method: str, norm: str) -> None:
    # ranx's CombMAX/CombMIN stand a missing document in as -1e9/+1e9; max-normalising all-negative scores
    # (s / 1e-9) passes that sentinel, where ranx returns the sentinel itself: retbench takes the max over the
    # systems that returned the document, so the all-negative case is left out for `max`
    shift = 0.0 if norm == "max" else -5.0
    for seed, scale in ((1, (1.0, 1.0, 1.0)), (2, (25.0, 1.0, 0.01))):
        runs = make_runs(seed, scale, shift)
        assert_same_scores(ours(runs, method, norm), ranx_fused(runs, method, RANX_NORMS[norm]))


@pytest.mark.parametrize("method", [m for m in RANK_BASED if "condorcet" not in m])
def test_each_rank_based_fusion_equals_ranx(method: str) -> None:
    runs = make_runs(3, (3.0, 1.0, 0.5))
    assert_same_scores(ours(runs, method, "minmax"), ranx_fused(runs, method, "min-max"))


def transitive_runs(seed: int) -> list[dict[str, dict[str, float]]]:
    """Three systems ranking the same documents, with a majority relation that is a total order.

    ranx's Condorcet sorts with a comparator that is not antisymmetric when votes tie or cycle, so its order
    then depends on Python's set order; with three full rankings and no cycle both give the one majority order.
    """
    rng = np.random.default_rng(seed)
    runs: list[dict[str, dict[str, float]]] = [{}, {}, {}]
    q = 0
    while q < 15:
        docs = [f"d{q}-{i}" for i in range(int(rng.integers(3, 9)))]
        perms = [list(rng.permutation(docs)) for _ in range(3)]
        pos = [{d: i for i, d in enumerate(p)} for p in perms]
        beats = {(x, y) for x in docs for y in docs if x != y and sum(p[x] < p[y] for p in pos) >= 2}
        wins = {d: sum((d, e) in beats for e in docs) for d in docs}
        if sorted(wins.values()) != list(range(len(docs))):  # a cycle: try another query
            continue
        for run, perm in zip(runs, perms, strict=True):
            run[f"q{q}"] = {d: float(len(perm) - i) + float(rng.random()) * 0.1 for i, d in enumerate(perm)}
        q += 1
    return runs


@pytest.mark.parametrize("method", ["condorcet", "weighted_condorcet"])
def test_condorcet_equals_ranx_where_the_majority_is_a_total_order(method: str) -> None:
    runs = transitive_runs(4)
    assert_same_scores(ours(runs, method, "minmax"), ranx_fused(runs, method, "min-max"))


def test_fuse_runs_applies_each_method_to_whole_runs_like_ranx() -> None:
    runs = make_runs(5)
    built = []
    for i, r in enumerate(runs):
        b = RunBuilder(f"s{i}")
        for q, docs in r.items():
            b.add(q, sorted(docs.items(), key=lambda kv: -kv[1]))
        built.append(b.build())
    for method in ("combmnz", "isr", "borda"):
        fused = fuse_runs(built, method, normalization="sum")
        got = {q: dict(fused.ranking(q)) for q in fused.query_ids}
        assert_same_scores(got, ranx_fused(runs, method, "sum"))


def test_ties_in_fused_scores_are_broken_by_doc_id_descending() -> None:
    fused = fuse([[("a", 3.0), ("b", 1.0)], [("b", 3.0), ("a", 1.0)]], "isr")
    assert fused[0][1] == fused[1][1]
    assert [d for d, _ in fused] == ["b", "a"]


@pytest.mark.parametrize("norm", sorted(RANX_NORMS))
def test_a_query_every_system_returned_nothing_for_fuses_to_an_empty_ranking_as_in_ranx(norm: str) -> None:
    # the other queries are checked against ranx on the runs without the empty one: ranx's z-score (zmuv)
    # normalisation returns nothing for every query of a run that holds an empty one
    full = make_runs(4)
    runs = [r | {"q-empty": {}} for r in full]
    for method in ("combsum", "combmnz", "wsum"):
        got = ours(runs, method, norm)
        assert got["q-empty"] == {} == ranx_fused(runs, method, RANX_NORMS[norm]).get("q-empty", {})
        assert_same_scores({q: d for q, d in got.items() if q != "q-empty"}, ranx_fused(full, method, RANX_NORMS[norm]))
