"""The gate's flow on a label study (`retbench gate --labels STUDY`, `retbench.gate(..., labels=STUDY)`): the
candidate and baseline are two of the study's systems (by default its decision: baseline A, candidate B), their
numbers the study's prediction-powered estimates at the criteria's alpha, judged by the gate's own rules
(`gates.labels`). Nothing is recorded in the history: a study is not a results directory of `retbench run`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from retbench.criteria import Criteria, load_criteria
from retbench.errors import InputError
from retbench.gates.flow import GateRun
from retbench.gates.labels import study_gates
from retbench.studies.labels.answer import estimate_study
from retbench.studies.labels.study import STUDY_FILE, Study, read_study


def _sides(study: Study, candidate: str | None, baseline: str | None) -> tuple[str, str | None]:
    """(candidate, baseline): the names given, else the study's decision (B is the candidate, A the baseline)."""
    decision = study.meta.get("decision") or {}
    cand = candidate or decision.get("b")
    base = baseline or (decision.get("a") if candidate is None or candidate == decision.get("b") else None)
    if cand is None:
        raise InputError(
            "the study has no decision: name the candidate with --candidate-system (and a baseline with "
            "--baseline-system)",
            path=study.path / STUDY_FILE,
            field="decision",
        )
    for name in (cand, base):
        if name is not None and name not in study.systems:
            raise InputError(
                f"no system {name!r} in this study (systems: {', '.join(study.systems)})",
                path=study.path / STUDY_FILE,
                field="systems",
            )
    if base == cand:
        raise InputError(f"the candidate and the baseline are the same system ({cand!r})", field="baseline_system")
    return cand, base


def _answered(study: Study) -> dict[str, dict[str, int]]:
    """Each system's {"queries", "answered"}: the study's pooled queries, and those it returned a document for
    (a query it did not answer scores 0 in the study's estimates)."""
    qids = {p["qid"] for p in study.pairs}
    return {
        s: {"queries": len(qids), "answered": len({p["qid"] for p in study.pairs if s in p["pooled_by"]})}
        for s in study.systems
    }


def gate_study(
    criteria: Criteria | str | Path,
    study_dir: str | Path,
    *,
    candidate_system: str | None = None,
    baseline_system: str | None = None,
    note: Callable[[str], None] | None = None,
) -> GateRun:
    """Apply ship criteria to two systems of a label study; bad criteria or names raise `InputError` (exit 2),
    the verdict is in `GateRun.report` (exit code 0 pass, 1 failed)."""
    crit = criteria if isinstance(criteria, Criteria) else load_criteria(criteria)
    study = read_study(study_dir)
    cand, base = _sides(study, candidate_system, baseline_system)
    answer = estimate_study(study.path, crit.alpha, pair=(base, cand) if base is not None else None)
    k = int(study.meta["k"])
    where = {"path": str(study.path), "metric": answer["metric"], "k": k, "estimand": answer.get("estimand")}
    report = study_gates(crit, answer, cand, base, k=k, counts=_answered(study), study=where)
    said = [f"label study: {study.path} ({answer['metric']}, {answer.get('estimand', 'population')} estimand)"]
    said += [f"note: {line}" for line in answer.get("labels", {}).get("notes", [])]
    if note is not None:
        for line in said:
            note(line)
    return GateRun(report, said)
