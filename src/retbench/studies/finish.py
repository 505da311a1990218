"""A study's finish step: the report beside its results and the history entry, the same for every caller.

`retbench run` and a Python caller of `studies.benchmark.run_experiment` get the same files: the
report is built from the study's `StudyResult` as the cells left it in memory (values, blocks, tables,
runs, the dataset), so nothing is read back or evaluated again; `retbench report` builds the same report
from the `StudyResult` the reader makes of the directory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from retbench.errors import RetbenchError
from retbench.io.files import write_text
from retbench.report.html import render_html
from retbench.report.markdown import report_markdown
from retbench.report.model import build_report
from retbench.results.history import default_path, register
from retbench.results.model import StudyResult
from retbench.studies.outcome import StudyOutcome


def write_reports(out: Path, outcome: StudyOutcome[Any], log: Callable[[str], None]) -> list[str]:
    """report.md and report.html beside the results, from the study's `StudyResult` in memory.

    A report that cannot be built costs a note, never the results (metrics.json is already written).
    """
    try:
        data = build_report(outcome.result)
    except (RetbenchError, OSError) as exc:
        log(f"note: no report written ({exc}); see metrics.json")
        return []
    write_text(out / "report.md", report_markdown(data))
    write_text(out / "report.html", render_html(data))
    return ["report.md", "report.html"]


def register_history(result: StudyResult, configured: str | None, tag: str | None, log: Callable[[str], None]) -> None:
    """Add the study's results to the history; a history that cannot be written costs a note, never the results."""
    where = default_path(configured)
    try:
        done = register(result, path=where, tag=tag)
    except (sqlite3.Error, OSError) as exc:
        log(f"note: not added to the history {where}: {exc}")
        return
    for line in done.lines(where):
        log(line)
