"""Label-free gates (`movement:` in ship criteria): the candidate's top k against the baseline's, no qrels; the
same verdicts, exit codes and PR comment as metric gates."""

from __future__ import annotations

from pathlib import Path

import pytest

from retbench.criteria import load_criteria
from retbench.errors import ConfigError
from retbench.gates import gate
from retbench.report.gate_comment import render_comment


def _trec(path: Path, run: dict[str, list[str]]) -> Path:
    path.write_text("".join(f"{q} Q0 {d} {r} {50 - r} sys\n" for q, docs in run.items() for r, d in enumerate(docs, 1)))
    return path


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    base = {f"q{i}": [f"d{i}-{j}" for j in range(12)] for i in range(10)}
    cand = {q: list(docs) for q, docs in base.items()}
    for q in ("q0", "q1", "q2"):  # 3 of 10 queries get a new document in their top 10
        cand[q] = [f"{q}-new", *cand[q][:-1]]
    return _trec(tmp_path / "base.trec", base), _trec(tmp_path / "cand.trec", cand)


def _criteria(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "criteria.yaml"
    path.write_text(body)
    return path


def test_a_churn_limit_fails_the_gate_when_more_queries_change_their_top_10(runs, tmp_path):
    base, cand = runs
    strict = _criteria(tmp_path, "movement:\n  - {name: churn, measure: changed_set, k: 10, max: 0.2}\n")
    done = gate(strict, cand, base, n_resamples=200)
    assert done.exit_code == 1 and done.verdict == "fail"
    (check,) = done.report.movement
    assert check.value == pytest.approx(0.3) and check.changed == 3 and check.queries == 10
    comment = render_comment(done.report)
    assert "blocks merge" in comment and "changed_set@10" in comment and "3 of 10" in comment
    assert done.report.to_dict()["movement"][0]["passed"] is False


def test_limits_the_candidate_meets_pass_and_a_warning_does_not_block(runs, tmp_path):
    base, cand = runs
    ok = _criteria(
        tmp_path,
        "movement:\n"
        "  - {name: churn, measure: changed_set, max: 0.5}\n"
        "  - {name: rbo, measure: rbo_ext, p: 0.9, min: 0.8}\n"
        "  - {name: order, measure: changed_order, max: 0.1, severity: warning}\n",
    )
    done = gate(ok, cand, base, n_resamples=200)
    assert done.exit_code == 0 and done.verdict == "warn"
    assert [m.passed for m in done.report.movement] == [True, True, False]


def test_movement_limits_need_a_baseline_run_and_a_known_measure(runs, tmp_path):
    _, cand = runs
    criteria = _criteria(tmp_path, "movement:\n  - {name: churn, measure: changed_set, max: 0.2}\n")
    with pytest.raises(ConfigError, match="baseline"):
        gate(criteria, cand, None)
    bad = _criteria(tmp_path, "movement:\n  - {name: churn, measure: churn_rate, max: 0.2}\n")
    with pytest.raises(ConfigError, match="measure") as err:
        load_criteria(bad)
    assert "criteria.yaml:2" in str(err.value)
    nothing = _criteria(tmp_path, "alpha: 0.05\n")
    with pytest.raises(ConfigError, match="at least one gate"):
        load_criteria(nothing)
