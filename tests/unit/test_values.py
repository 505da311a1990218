"""Document values: the exact KNN-Shapley recursion equals Shapley's definition over every coalition, the
streamed path equals the recursion, Monte-Carlo agrees with exact within its error, and efficiency holds."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from retbench.errors import InputError
from retbench.values import (
    Judged,
    charges,
    id_tiebreak,
    leave_one_out_ranked,
    leave_one_out_sorted,
    ndcg_at,
    permutation_shapley,
    precision_at,
    ranking_order,
    ranks_from_order,
    recall_at,
    shapley_sorted,
    shapley_streamed,
)


def _utility(scores: np.ndarray, labels: np.ndarray, k: int, z: float, tb: np.ndarray, members: list[int]) -> float:
    """Precision/recall@K of one query restricted to `members`, by its definition (sort, cut, sum)."""
    ranked = sorted(members, key=lambda d: (-scores[d], -tb[d]))
    return float(sum(labels[d] for d in ranked[:k]) / z)


def _brute_shapley(scores, labels, k, z, tb) -> np.ndarray:
    n = len(scores)
    out = np.zeros(n)
    for i in range(n):
        others = [d for d in range(n) if d != i]
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for s in itertools.combinations(others, size):
                gain = _utility(scores, labels, k, z, tb, [*s, i]) - _utility(scores, labels, k, z, tb, list(s))
                out[i] += weight * gain
    return out


def _case(rng: np.random.Generator, n: int, q: int, dim: int = 4, ties: bool = False):
    docs = rng.normal(size=(n, dim))
    if ties:  # exact duplicates: identical vectors tie on every query
        docs[n - 1] = docs[0]
        docs[n - 2] = docs[1]
    queries = rng.normal(size=(q, dim))
    labels = (rng.random((q, n)) < 0.35).astype(float)
    labels[np.arange(q), rng.integers(0, n, q)] = 1.0  # every query has a relevant document
    return queries, docs, labels


@pytest.mark.parametrize("n", [1, 2, 5, 8])
@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("ties", [False, True])
def test_exact_values_equal_shapley_over_every_coalition(n: int, k: int, ties: bool) -> None:
    rng = np.random.default_rng(n * 100 + k + ties)
    queries, docs, labels = _case(rng, n, 3, ties=ties and n >= 4)
    scores = queries @ docs.T
    tb = id_tiebreak([f"d{i}" for i in range(n)])
    for name, z in (("precision", np.full(3, float(k))), ("recall", labels.sum(axis=1) + 1.0)):
        got = shapley_sorted(scores, labels, k, z, tb)
        for row in range(3):
            want = _brute_shapley(scores[row], labels[row], k, z[row], tb)
            np.testing.assert_allclose(got[row], want, rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("n,k", [(6, 2), (8, 3), (3, 5)])
def test_leave_one_out_is_utility_of_all_minus_utility_without_the_document(n: int, k: int) -> None:
    rng = np.random.default_rng(n + k)
    queries, docs, labels = _case(rng, n, 4, ties=True)
    scores = queries @ docs.T
    tb = id_tiebreak([f"d{i}" for i in range(n)])
    z = np.full(4, float(k))
    got = leave_one_out_sorted(scores, labels, k, z, tb)
    for row in range(4):
        everyone = list(range(n))
        full = _utility(scores[row], labels[row], k, k, tb, everyone)
        want = [full - _utility(scores[row], labels[row], k, k, tb, [d for d in everyone if d != i]) for i in everyone]
        np.testing.assert_allclose(got[row], want, atol=1e-12)


def _judged(labels: np.ndarray, z: np.ndarray) -> Judged:
    qi, di = np.nonzero(labels)
    return Judged(qi, di, labels[qi, di], z)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("block", [1, 4, 64])
def test_streamed_values_equal_the_recursion_averaged_over_queries(ties: bool, block: int) -> None:
    rng = np.random.default_rng(7 + ties)
    n, q, k = 300, 23, 5
    queries, docs, labels = _case(rng, n, q, dim=8, ties=ties)
    labels[rng.random((q, n)) < 0.9] = 0.0
    labels[np.arange(q), rng.integers(0, n, q)] = 1.0
    ids = [f"doc{i:04d}" for i in range(n)][::-1]
    tb = id_tiebreak(ids)
    z = labels.sum(axis=1)  # recall@k
    scores = queries @ docs.T
    got = shapley_streamed(queries, docs, _judged(labels, z), k, tb, block=block)
    np.testing.assert_allclose(got.shapley, shapley_sorted(scores, labels, k, z, tb).mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(
        got.leave_one_out, leave_one_out_sorted(scores, labels, k, z, tb).mean(axis=0), atol=1e-12
    )
    order = ranking_order(scores, tb)
    topk = np.take_along_axis(labels, order, axis=1)[:, :k].sum(axis=1) / z
    np.testing.assert_allclose(got.utility, topk, atol=1e-12)


def test_values_sum_to_the_utility_of_the_whole_corpus() -> None:
    rng = np.random.default_rng(3)
    queries, docs, labels = _case(rng, 200, 17, dim=6)
    tb = id_tiebreak([str(i) for i in range(200)])
    got = shapley_streamed(queries, docs, _judged(labels, np.full(17, 10.0)), 10, tb)
    assert got.shapley.sum() == pytest.approx(got.utility.mean(), abs=1e-12)  # U(empty) = 0


def test_a_document_that_crowds_a_relevant_one_out_of_the_top_k_has_negative_value() -> None:
    # one query along x; d0 relevant at 0.5; d1, d2 not relevant at 0.9 and 0.8; k = 1
    docs = np.array([[0.5, 0.0], [0.9, 0.0], [0.8, 0.0]])
    labels = np.array([[1.0, 0.0, 0.0]])
    values = shapley_sorted(np.array([[0.5, 0.9, 0.8]]), labels, 1, np.array([1.0]), id_tiebreak(["a", "b", "c"]))
    assert values[0, 0] > 0 and values[0, 1] < 0 and values[0, 2] < 0
    assert values.sum() == pytest.approx(0.0)  # U(all) = 0: the relevant document is not first
    del docs


@pytest.mark.parametrize("utility", ["precision", "recall"])
def test_monte_carlo_agrees_with_exact_within_four_standard_errors(utility: str) -> None:
    rng = np.random.default_rng(11)
    n, q, k = 40, 6, 3
    queries, docs, labels = _case(rng, n, q)
    scores = queries @ docs.T
    tb = id_tiebreak([f"d{i:02d}" for i in range(n)])
    z = np.full(q, float(k)) if utility == "precision" else labels.sum(axis=1)
    fn = precision_at(k) if utility == "precision" else recall_at(k, labels.sum(axis=1))
    exact = shapley_sorted(scores, labels, k, z, tb).mean(axis=0)
    est = permutation_shapley(ranks_from_order(ranking_order(scores, tb)), labels, fn, permutations=400, seed=5)
    se = np.maximum(est.stderr, 1e-12)
    assert np.all(np.abs(est.values - exact) <= 4 * se + 1e-12)
    assert est.values.sum() == pytest.approx(exact.sum(), abs=1e-9)  # each permutation telescopes to U(all)


def test_monte_carlo_ndcg_equals_brute_force_on_a_small_corpus() -> None:
    rng = np.random.default_rng(2)
    n, k = 5, 3
    scores = rng.normal(size=(1, n))
    grades = np.array([[2.0, 0.0, 1.0, 0.0, 1.0]])
    tb = id_tiebreak([str(i) for i in range(n)])
    util = ndcg_at(k, [grades[0][grades[0] > 0]])
    order = ranking_order(scores, tb)

    def u(members: list[int]) -> float:
        ranked = [d for d in order[0] if d in members][:k]
        g = np.zeros((1, k))
        g[0, : len(ranked)] = grades[0, ranked]
        return float(util(g, np.array([0]))[0])

    want = np.zeros(n)
    for perm in itertools.permutations(range(n)):
        for t, d in enumerate(perm):
            want[d] += (u(list(perm[: t + 1])) - u(list(perm[:t]))) / math.factorial(n)
    est = permutation_shapley(ranks_from_order(order), grades, util, permutations=3000, seed=1)
    assert np.all(np.abs(est.values - want) <= 4 * np.maximum(est.stderr, 1e-12) + 1e-12)


def test_bad_inputs_name_what_is_wrong() -> None:
    with pytest.raises(InputError, match="denominator"):
        shapley_sorted(np.zeros((1, 2)), np.zeros((1, 2)), 1, np.array([0.0]), np.arange(2))
    with pytest.raises(InputError, match="k must be"):
        shapley_sorted(np.zeros((1, 2)), np.zeros((1, 2)), 0, np.array([1.0]), np.arange(2))
    with pytest.raises(InputError, match="2 permutations"):
        permutation_shapley(np.zeros((1, 2), int), np.zeros((1, 2)), precision_at(1), permutations=1)


def test_charges_split_a_value_into_the_queries_it_comes_from_and_name_what_is_crowded_out() -> None:
    rng = np.random.default_rng(4)
    n, q, k = 120, 9, 3
    queries, docs, labels = _case(rng, n, q, dim=5)
    labels[rng.random((q, n)) < 0.8] = 0.0
    labels[np.arange(q), rng.integers(0, n, q)] = 1.0
    tb = id_tiebreak([f"d{i:03d}" for i in range(n)])
    judged = _judged(labels, labels.sum(axis=1))
    scores = queries @ docs.T
    streamed = shapley_streamed(queries, docs, judged, k, tb)
    per_query = shapley_sorted(scores, labels, k, labels.sum(axis=1), tb)
    order = ranking_order(scores, tb)
    for d in range(n):
        got, displaced = charges(d, scores[:, d], judged, streamed, k, tb)
        np.testing.assert_allclose(got, per_query[:, d], atol=1e-12)
        for x in displaced:
            ranked = list(order[x.query])
            assert labels[x.query, x.doc] > 0 and ranked.index(x.doc) + 1 == x.position > k
            assert ranked.index(d) < ranked.index(x.doc)


def test_leave_one_out_from_ranks_equals_the_exact_one_for_any_utility_with_a_closed_form() -> None:
    rng = np.random.default_rng(9)
    for n in (2, 4, 30):
        queries, docs, labels = _case(rng, n, 5, ties=n >= 4)
        scores = queries @ docs.T
        tb = id_tiebreak([f"d{i}" for i in range(n)])
        ranks = ranks_from_order(ranking_order(scores, tb))
        got = leave_one_out_ranked(ranks, labels, precision_at(3))
        want = leave_one_out_sorted(scores, labels, 3, np.full(5, 3.0), tb).mean(axis=0)
        np.testing.assert_allclose(got, want, atol=1e-12)
