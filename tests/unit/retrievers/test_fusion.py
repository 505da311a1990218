"""Fusion methods on worked examples small enough to check by hand (ranx parity is in tests/parity)."""

from __future__ import annotations

import math

import pytest

from retbench.retrievers.fusion import fuse
from retbench.retrievers.fusion_options import FUSIONS, canonical_fusion

A = [("a", 10.0), ("b", 5.0), ("c", 0.0)]  # minmax -> a 1, b .5, c 0
B = [("c", 0.9), ("a", 0.5), ("d", 0.1)]  # minmax -> c 1, a .5, d 0


def scores(method: str, **kw: object) -> dict[str, float]:
    return dict(fuse([A, B], method, **kw))  # type: ignore[arg-type]


def test_comb_family_worked_example():
    assert scores("combsum") == pytest.approx({"a": 1.5, "b": 0.5, "c": 1.0, "d": 0.0})
    assert scores("combmnz") == pytest.approx({"a": 3.0, "b": 0.5, "c": 2.0, "d": 0.0})
    assert scores("combanz") == pytest.approx({"a": 0.75, "b": 0.5, "c": 0.5, "d": 0.0})
    assert scores("combmax") == pytest.approx({"a": 1.0, "b": 0.5, "c": 1.0, "d": 0.0})
    assert scores("combmin") == pytest.approx({"a": 0.5, "b": 0.5, "c": 0.0, "d": 0.0})
    assert scores("combgmnz", param=2.0) == pytest.approx({"a": 6.0, "b": 0.5, "c": 4.0, "d": 0.0})


def test_rank_family_worked_example():
    assert scores("isr") == pytest.approx({"a": (1 + 1 / 4) * 2, "b": 1 / 4, "c": (1 / 9 + 1) * 2, "d": 1 / 9})
    assert scores("log_isr")["a"] == pytest.approx((1 + 1 / 4) * math.log(2))
    assert scores("log_isr")["b"] == 0.0  # log 1: a document one system returned scores nothing
    assert scores("rbc", param=0.5) == pytest.approx({"a": 0.5 + 0.25, "b": 0.25, "c": 0.125 + 0.5, "d": 0.125})
    # Borda over the 4 candidates: A gives a 4, b 3, c 2, d (4-3+1)/2 = 1; B gives c 4, a 3, d 2, b 1
    assert scores("borda") == pytest.approx({"a": 7.0, "b": 4.0, "c": 6.0, "d": 3.0})
    # Condorcet: a beats b 2-1 and c 3-0, b beats c 2-1 (scores are ignored: only the orders vote)
    x, y, z = (
        [("a", 3.0), ("b", 2.0), ("c", 1.0)],
        [("b", 9.0), ("a", 8.0), ("c", 7.0)],
        [("a", 0.3), ("c", 0.2), ("b", 0.1)],
    )
    assert fuse([x, y, z], "condorcet") == [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    # weighted: y alone outvotes x and z together, so b comes first
    assert [d for d, _ in fuse([x, y, z], "weighted_condorcet", weights=[1, 3, 1])] == ["b", "a", "c"]


def test_rank_based_methods_ignore_the_normalisation():
    for method in ("isr", "borda", "rbc"):
        assert fuse([A, B], method, normalization="zscore") == fuse([A, B], method, normalization="sum")


def test_a_method_that_reads_no_weights_refuses_them_rather_than_ignoring_them():
    with pytest.raises(ValueError, match="takes no weights"):
        fuse([A, B], "combmnz", weights=[0.2, 0.8])
    assert fuse([A, B], "combmnz", weights=[1, 1]) == fuse([A, B], "combmnz")
    assert scores("wsum", weights=[0.3, 0.7]) == pytest.approx({"a": 0.65, "b": 0.15, "c": 0.7, "d": 0.0})


def test_a_method_parameter_is_required_only_where_there_is_no_default():
    with pytest.raises(ValueError, match="gamma"):
        fuse([A, B], "combgmnz")
    assert fuse([A, B], "rbc") == fuse([A, B], "rbc", param=0.8)
    with pytest.raises(ValueError, match="finite"):
        fuse([A, B], "rbc", param=float("nan"))


def test_ranx_names_are_accepted_and_unknown_names_list_the_valid_ones():
    assert canonical_fusion("mnz") == "combmnz"
    assert canonical_fusion("w_bordafuse") == "weighted_borda"
    assert fuse([A, B], "sum") == fuse([A, B], "combsum")
    with pytest.raises(ValueError, match="expected one of") as err:
        canonical_fusion("combmedian")
    assert all(m in str(err.value) for m in FUSIONS)
    with pytest.raises(ValueError, match="normalization"):
        fuse([A, B], "combsum", normalization="softmax")
