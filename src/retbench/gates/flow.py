"""The gate's whole flow: baseline resolved (a history entry, a results directory, a run file), same data and
same settings checked, the criteria applied (`gates.apply.run_gates`), the verdict recorded in the history.

`retbench gate` parses its options, calls `gate` and renders the report; a Python caller (`retbench.gate`)
gets the same verdict from the same steps.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from retbench.criteria import Criteria, load_criteria
from retbench.data import Run
from retbench.errors import ConfigError
from retbench.gates.apply import GateReport, run_gates
from retbench.gates.movement import movement_checks
from retbench.inputs import (
    Loaded,
    canonical_metrics,
    check_same_data,
    check_same_settings,
    load_history,
    load_systems,
)
from retbench.movement import load_run
from retbench.results import history
from retbench.results.history_read import NoBaseline

Note = Callable[[str], None]


@dataclass
class GateRun:
    """What a gate did: its report, the lines it said on the way (baseline found, notes on data and
    settings, where the verdict was recorded) and the history run the verdict was recorded on (None: not)."""

    report: GateReport
    notes: list[str] = field(default_factory=list)
    recorded_on: int | None = None

    @property
    def exit_code(self) -> int:
        return self.report.exit_code

    @property
    def verdict(self) -> str:
        return self.report.verdict


def gate(
    criteria: Criteria | str | Path,
    candidate: str | Path,
    baseline: str | Path | None = None,
    *,
    candidate_system: str | None = None,
    baseline_system: str | None = None,
    qrels: str | Path | None = None,
    queries: str | Path | None = None,
    history_file: str | Path | None = None,
    allow_different_data: bool = False,
    allow_different_settings: bool = False,
    n_resamples: int = 10_000,
    seed: int = 0,
    record: bool = True,
    note: Note | None = None,
) -> GateRun:
    """Apply ship criteria to a candidate (a results directory or a run file) against a baseline (a results
    directory, a run file, or `history:last-pass` / `history:last` / `history:<tag>` / `history:<id>`).

    The same steps as `retbench gate`: the baseline resolved (a history baseline of a results directory is
    the latest earlier point of the candidate's own experiment, dataset and system; none yet means thresholds
    only), results on different data or with settings that make them incomparable refused unless allowed,
    the gates applied, and (`record`) the verdict recorded on the candidate's history point. Each line said on
    the way goes to `note` as it happens and into `GateRun.notes`. Bad criteria or inputs raise `InputError`
    (exit 2); the verdict itself is in `GateRun.report` (exit code 0 pass, 1 failed, 3 backend failures).
    """
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if note is not None:
            note(line)

    crit = criteria if isinstance(criteria, Criteria) else load_criteria(criteria)
    if not crit.gates:  # label-free limits only: no qrels, no per-query tables
        base_run, cand_run = _movement_runs(crit, baseline, candidate, baseline_system, candidate_system)
        report = GateReport([], crit, cand_run.name or str(candidate), base_run.name or str(baseline), {}, None, {},
                            n_resamples, seed)  # fmt: skip
        report.movement = movement_checks(crit.movement, base_run, cand_run, n_resamples=n_resamples, seed=seed)
        return GateRun(report, said)
    metrics = list(dict.fromkeys(g.metric for g in crit.gates))
    where = Path(candidate)
    cand = load_systems([where], qrels=qrels, metrics=metrics, queries=queries, check_metrics=False)
    # a history:last-pass baseline is the candidate system's own key: that system is known first
    asked = str(baseline) if baseline is not None else None
    from_history = asked is not None and asked.startswith("history:")
    cand_ev = cand.one(candidate_system, "candidate") if from_history else None
    point = (where, cand_ev.system) if cand_ev is not None and where.is_dir() else None
    base, matched = _gate_baseline(asked, qrels, metrics, history_file, point, say)
    check_same_data(allow_different_data, cand, *([base] if base is not None else []), note=_noted(say))
    cand_ev = cand_ev or cand.one(candidate_system, "candidate")
    base_ev = base.one(baseline_system or matched, "baseline") if base is not None else None
    if base is not None and base_ev is not None:
        pair = (
            (f"baseline {base_ev.system}", base_ev.system, base),
            (f"candidate {cand_ev.system}", cand_ev.system, cand),
        )
        check_same_settings(allow_different_settings, [pair], canonical_metrics(metrics), note=_noted(say))
    report = run_gates(
        crit,
        cand_ev,
        base_ev,
        groups=cand.groups,
        failures=cand.failures.get(cand_ev.system),
        n_resamples=n_resamples,
        seed=seed,
        first=base is None and asked is not None,
    )
    report.caveats = [cand.caveat(cand_ev.system), *([base.caveat(base_ev.system)] if base and base_ev else [])]
    if crit.movement:
        base_run, cand_run = _movement_runs(
            crit, baseline, candidate, base_ev.system if base_ev else None, cand_ev.system if where.is_dir() else None
        )
        report.movement = movement_checks(crit.movement, base_run, cand_run, n_resamples=n_resamples, seed=seed)
    run = GateRun(report, said)
    if record and where.is_dir():
        run.recorded_on = _record_verdict(where, report, cand_ev.system, history_file, say)
    return run


def _movement_runs(
    crit: Criteria,
    baseline: str | Path | None,
    candidate: str | Path,
    baseline_system: str | None,
    candidate_system: str | None,
) -> tuple[Run, Run]:
    """The two runs movement limits compare: a baseline run file or results directory is required."""
    if baseline is None or str(baseline).startswith("history:"):
        raise ConfigError(
            "movement limits compare the candidate's rankings with a baseline's: give --baseline as a run file or "
            "a results directory",
            path=crit.path,
            line=crit.movement[0].line,
            field="movement",
        )
    base_system = baseline_system if Path(baseline).is_dir() else None
    cand_system = candidate_system if Path(candidate).is_dir() else None
    return load_run(baseline, base_system), load_run(candidate, cand_system)


def _noted(say: Note) -> Note:
    return lambda line: say(f"note: {line}")


def _record_verdict(
    where: Path, report: GateReport, system: str, history_file: str | Path | None, say: Note
) -> int | None:
    """Record the verdict on the candidate's history point; a history that cannot be written costs a note."""
    passed = report.exit_code == 0
    try:
        run_id = history.record_gate(where, passed, system=system, path=history_file)
    except (sqlite3.Error, OSError) as exc:  # the verdict stands; only its record in the history is lost
        say(f"note: verdict not recorded in the history: {exc}")
        return None
    if run_id is not None:
        say(f"history: {system} {'pass' if passed else 'fail'} recorded on run {run_id}")
    return run_id


def _gate_baseline(
    baseline: str | None,
    qrels: str | Path | None,
    metrics: list[str],
    history_file: str | Path | None,
    candidate: tuple[Path, str] | None,
    say: Note,
) -> tuple[Loaded | None, str | None]:
    """The gate's baseline and the system it matched: a history entry (history:last-pass / last / <tag> / <id>),
    a results directory or a run file.

    `history:last-pass` and `history:last` of a results directory mean the latest point of the candidate's
    experiment, dataset and system before the candidate; when there is none yet (the first gate of a
    project) the gate checks thresholds only, and says so: its verdict becomes the next gate's baseline.
    """
    if baseline is None:
        return None, None
    if not baseline.startswith("history:"):
        return load_systems([Path(baseline)], qrels=qrels, metrics=metrics, check_metrics=False), None
    try:
        base, entry = load_history(baseline, history_file, candidate=candidate)
    except NoBaseline as exc:
        if baseline not in ("history:last-pass", "history:last"):
            raise
        say(
            f"note: {exc.reason}: this gate checks thresholds only (regression limits start with the next gate, "
            "against this run once it passes)"
        )
        return None, None
    say(f"baseline: history run {entry.id} of {entry.created} (commit {entry.git_commit or 'none'})")
    return base, entry.matched
