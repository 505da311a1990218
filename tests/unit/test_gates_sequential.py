"""Sequential gates: anytime-valid sequences decide require_significance and are shown with what they allow."""

from __future__ import annotations

import pytest

import abdata
from retbench.criteria import parse_criteria
from retbench.errors import ConfigError
from retbench.gates import run_gates
from retbench.report.gate_comment import gate_json, render_comment


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    return abdata.evaluations(tmp_path_factory.getbasetemp())


def _gate(metric: str, **kw) -> dict:
    return {"name": metric, "metric": metric, "regression_max": 0.02, "require_significance": True, **kw}


def test_a_drop_significant_at_one_look_but_not_anytime_passes_a_sequential_gate_and_says_why(evals):
    """bm25_weak's MRR@10 is 3.7 points below bm25's with p < 0.05, but its sequence still holds 0."""
    base, cand = evals["bm25"], evals["bm25_weak"]
    plain = run_gates(parse_criteria({"gates": [_gate("mrr@10")]}), cand, base, n_resamples=2000)
    watched = run_gates(parse_criteria({"gates": [_gate("mrr@10")], "sequential": True}), cand, base, n_resamples=2000)
    assert plain.results[0].p < 0.05 and plain.exit_code == 1
    result = watched.results[0]
    assert watched.exit_code == 0 and result.checks[0].waived and result.checks[0].sequential
    seq = result.sequence["delta"]
    assert seq["low"] < 0 <= seq["high"] and seq["anytime_valid"]
    assert seq["n"] == len(base.query_ids)
    data = gate_json(watched)["gates"][0]
    assert "confidence sequence of the change still holds 0" in data["checks"][0]["note"]
    assert "anytime-valid" in data["sequence_note"]
    assert "may be looked at after every query" in render_comment(watched)


def test_a_drop_the_sequence_excludes_blocks_a_sequential_gate(evals):
    crit = parse_criteria({"gates": [_gate("ndcg@10", sequential=True)]})
    report = run_gates(crit, evals["bm25_weak"], evals["bm25"], n_resamples=2000)
    assert report.exit_code == 1
    assert report.results[0].sequence["delta"]["high"] < 0


def test_a_gate_can_turn_off_the_files_sequential_default_and_a_floor_only_gate_shows_the_candidates_sequence(evals):
    crit = parse_criteria(
        {"sequential": True, "gates": [_gate("mrr@10", sequential=False), {"name": "recall@5", "threshold": 0.5}]}
    )
    report = run_gates(crit, evals["bm25_weak"], evals["bm25"], n_resamples=2000)
    off, floor = report.results
    assert off.sequence is None and not off.checks[0].sequential
    assert set(floor.sequence) == {"a", "b", "delta"}
    alone = run_gates(
        parse_criteria({"sequential": True, "gates": [{"name": "recall@5", "threshold": 0.5}]}), evals["bm25"]
    )
    assert set(alone.results[0].sequence) == {"b"}


def test_a_sequential_key_that_is_not_a_boolean_is_named():
    with pytest.raises(ConfigError, match="sequential"):
        parse_criteria({"sequential": "often", "gates": [{"name": "recall@5", "threshold": 0.5}]})
