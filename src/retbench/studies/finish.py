"""A study's finish step: the report beside its results and the history entry, the same for every caller.

`retbench run` and a Python caller of `studies.benchmark.run_experiment` get the same files: the
report is built from what the cells hold in memory (tables, runs, the dataset), so nothing is read
back or evaluated again; `retbench report` builds the same report from the directory alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retbench.errors import RetbenchError
from retbench.report.html import render_html
from retbench.report.markdown import report_markdown
from retbench.report.model import InMemory, build_report
from retbench.results.files import write_text
from retbench.results.history import default_path, register
from retbench.studies.cell import StudyOutcome
from retbench.studies.dataset import PreparedData


def write_reports(
    out: Path, outcome: StudyOutcome[Any], prepared: Sequence[PreparedData], log: Callable[[str], None]
) -> list[str]:
    """report.md and report.html beside the results, from what the run holds in memory.

    A report that cannot be built costs a note, never the results (metrics.json is already written).
    """
    given = InMemory(
        evaluations={o.name: o.result.evaluation for o in outcome.systems if o.result is not None},
        runs={o.name: o.result.run for o in outcome.systems if o.result is not None},
        curves={o.name: o.result.curves for o in outcome.systems if o.result is not None and o.result.curves},
    )
    if len(prepared) == 1:  # the drill-down shows one dataset's documents
        given.qrels, given.corpus = prepared[0].qrels, prepared[0].dataset.corpus
        given.queries = {q: prepared[0].queries[q] for q in prepared[0].queries}
    try:
        data = build_report(out, given=given)
    except (RetbenchError, OSError) as exc:
        log(f"note: no report written ({exc}); see metrics.json")
        return []
    write_text(out / "report.md", report_markdown(data))
    write_text(out / "report.html", render_html(data))
    return ["report.md", "report.html"]


def register_history(out: Path, configured: str | None, tag: str | None, log: Callable[[str], None]) -> None:
    """Add the results to the history; a history that cannot be written costs a note, never the results."""
    where = default_path(configured)
    try:
        done = register(out, path=where, tag=tag)
    except (sqlite3.Error, OSError) as exc:
        log(f"note: not added to the history {where}: {exc}")
        return
    for line in done.lines(where):
        log(line)
