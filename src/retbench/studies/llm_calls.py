"""What the call logs of a study's LLM stages (generation, judging) say once the study has run.

A stage whose every call failed, or whose every reply was unparseable, produced no number at all: its metrics
would read as a system that answers nothing right, so the run exits 3 after every file is written
(`run_experiment` puts these lines in `StudyOutcome.llm_failures`; `outcome.raise_if_failed` raises). A stage where
only some calls gave no verdict stands; a note says how many (`StudyOutcome.llm_notes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from retbench.studies.judging import CALLS_FILE

#: statuses of a call that brought nothing back (an `unparseable` answer did come back)
FAILED_CALLS = ("judge_error", "judge_timeout", "generation_error", "generation_timeout")
#: statuses of a verdict that carries no value: its call failed, or the answer that came back could not be read
NO_VERDICT = (*FAILED_CALLS, "unparseable")
#: the call logs of the stages that call a model, beside each system's results
STAGE_LOGS = {"generation": "generate_calls.jsonl", "judging": CALLS_FILE}


def _stage_statuses(output: Path, systems: Iterable[str]) -> Iterator[tuple[str, str, Path, dict[str, int]]]:
    """(system, stage, call log, {status: count}) of every stage that made a call, from its call log
    (every call made for these results, across resumed runs; a cache hit is logged as an answer)."""
    from retbench.io.files import appended_records
    from retbench.results.layout import SystemDir

    for key in systems:
        root = SystemDir.of(output, key).root
        for stage, name in STAGE_LOGS.items():
            path = root / name
            if not path.is_file():
                continue
            statuses: dict[str, int] = {}
            for rec in appended_records(path):
                status = str(rec.get("status"))
                statuses[status] = statuses.get(status, 0) + 1
            if statuses:
                yield key, stage, path, statuses


def _counts(statuses: Mapping[str, int]) -> str:
    return ", ".join(f"{c} {s}" for s, c in sorted(statuses.items()) if s != "ok")


def failed_llm_stages(output: Path, systems: Iterable[str]) -> list[str]:
    """One line per (system, stage) that got no usable answer back: every call failed ("bm25: every
    generation call failed (3 generation_error; ...)") or every reply was unparseable or failed ("bm25: no
    judging call gave a verdict: 4 of 4 replies unparseable (...)")."""
    found = []
    for key, stage, path, statuses in _stage_statuses(output, systems):
        if all(s in FAILED_CALLS for s in statuses):
            found.append(f"{key}: every {stage} call failed ({_counts(statuses)}; see {path})")
        elif all(s in NO_VERDICT for s in statuses):
            total = sum(statuses.values())
            found.append(
                f"{key}: no {stage} call gave a verdict: {statuses.get('unparseable', 0)} of {total} replies "
                f"unparseable ({_counts(statuses)}; see {path})"
            )
    return found


def partial_llm_stages(output: Path, systems: Iterable[str]) -> list[str]:
    """One line per (system, stage) where some calls gave no verdict and others did: the run stands (those
    verdicts are statuses, left out of the judged metrics and counted) but the line says how many."""
    found = []
    for key, stage, path, statuses in _stage_statuses(output, systems):
        missing = sum(c for s, c in statuses.items() if s in NO_VERDICT)
        if missing and not all(s in NO_VERDICT for s in statuses):
            found.append(
                f"{key}: {missing} of {sum(statuses.values())} {stage} calls gave no verdict ({_counts(statuses)}); "
                f"they are counted, not scored (see {path})"
            )
    return found
