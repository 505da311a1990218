"""Label-free overlap measures against their references: the `rbo` package (Webber, Moffat and Zobel 2010's
RBO_EXT, eq. 32, equal and unequal lengths) and SciPy (Kendall's tau-b, Spearman's rho on the union of the two
top k with absent items at length + 1), on random rankings of many lengths and persistences."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from retbench.metrics.overlap import overlap_measures

rbo = pytest.importorskip("rbo", reason="the rbo package is not installed (scripts/setup.sh installs it)")
stats = pytest.importorskip("scipy.stats", reason="the dev extra (scipy) is not installed")


def _cases(n: int, equal: bool) -> list[tuple[list[int], list[int], int, float]]:
    rng = np.random.default_rng(7 if equal else 8)
    out = []
    for _ in range(n):
        k = int(rng.integers(1, 15))
        vocab = int(rng.integers(k, 3 * k + 2))
        la = k if equal else int(rng.integers(0, k + 1))
        lb = k if equal else int(rng.integers(0, k + 1))
        out.append(
            (
                rng.permutation(vocab)[:la].tolist(),
                rng.permutation(vocab)[:lb].tolist(),
                k,
                float(rng.choice([0.5, 0.8, 0.9, 0.95, 0.98])),
            )
        )
    return out


def _measures(cases: list[tuple[list[int], list[int], int, float]], p: float) -> dict[str, np.ndarray]:
    k = max(c[2] for c in cases)
    a = np.full((len(cases), k), -1, dtype=np.int64)
    b = np.full((len(cases), k), -1, dtype=np.int64)
    for i, (s, t, _, _) in enumerate(cases):
        a[i, : len(s)], b[i, : len(t)] = s, t
    return overlap_measures(a, b, p)


@pytest.mark.parametrize("equal", [True, False], ids=["equal lengths", "unequal lengths"])
def test_rbo_ext_matches_the_rbo_package(equal: bool) -> None:
    for p in (0.5, 0.9, 0.98):
        cases = [c for c in _cases(200, equal) if c[0] or c[1]]
        got = _measures(cases, p)["rbo_ext"]
        want = [rbo.RankingSimilarity(s, t).rbo_ext(p=p) for s, t, _, _ in cases]
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_rbo_ext_of_equal_lengths_is_the_packages_extrapolated_prefix() -> None:
    cases = [c for c in _cases(150, True) if c[0]]
    got = _measures(cases, 0.9)["rbo_ext"]
    want = [rbo.RankingSimilarity(s, t).rbo(p=0.9, ext=True) for s, t, _, _ in cases]
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("equal", [True, False], ids=["equal lengths", "unequal lengths"])
def test_kendall_and_spearman_match_scipy_on_the_union_with_absent_items_tied_after_the_end(equal: bool) -> None:
    cases = _cases(300, equal)
    got = _measures(cases, 0.9)
    tau, rho = [], []
    for s, t, _, _ in cases:
        union = list(dict.fromkeys(s + t))
        x = [s.index(u) + 1 if u in s else len(s) + 1 for u in union]
        y = [t.index(u) + 1 if u in t else len(t) + 1 for u in union]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a constant input: SciPy warns and returns NaN
            tau.append(stats.kendalltau(x, y).statistic if len(union) >= 2 else np.nan)
            rho.append(stats.spearmanr(x, y).statistic if len(union) >= 2 else np.nan)
    np.testing.assert_allclose(got["kendall"], tau, rtol=1e-10, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(got["spearman"], rho, rtol=1e-10, atol=1e-12, equal_nan=True)


def test_set_measures_match_python_sets() -> None:
    cases = _cases(300, False)
    k = max(c[2] for c in cases)
    got = _measures(cases, 0.9)
    inter = np.array([len(set(s) & set(t)) for s, t, _, _ in cases])
    union = np.array([len(set(s) | set(t)) for s, t, _, _ in cases])
    np.testing.assert_allclose(got["overlap"], inter / k)
    np.testing.assert_allclose(got["jaccard"], np.where(union > 0, inter / np.maximum(union, 1), 1.0))
    np.testing.assert_array_equal(got["changed_set"], [float(set(s) != set(t)) for s, t, _, _ in cases])
    np.testing.assert_array_equal(got["changed_order"], [float(s != t) for s, t, _, _ in cases])
