"""The streaming case as a study: run it, write the results folder, decide the exit code.

Files: `summary.json` (the figures, `streaming` block), `stream_queries.jsonl` (every live query: send time,
filter, batches acknowledged, latency, recall, failure classes), `failures.jsonl` (every failure with its
class and the store's message verbatim), `report.md` and `report.html`. The streaming case is not resumed
from a journal: a killed run is started again from scratch (the stream and its exact answers are the same).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from retbench.config import StressModel
from retbench.data import Dataset
from retbench.errors import EXIT_BACKEND, EXIT_OK
from retbench.io.files import write_jsonl, write_text
from retbench.report.stress_stream import render_html, render_markdown
from retbench.results.stress import StressSummary, write_stress
from retbench.results.stress_figures import Failure
from retbench.retrievers.base import Retriever
from retbench.studies.stress.streaming import prepare, run_case

STREAM_FILES = ("summary.json", "stream_queries.jsonl", "failures.jsonl", "report.md", "report.html")


def run_streaming(
    config: StressModel,
    retriever: Retriever,
    dataset: Dataset,
    qids: list[str],
    out: Path,
    summary: StressSummary,
    echo: Callable[[str], None],
) -> StressSummary:
    """Run the streaming case and write its files; returns the summary with `exit_code` set.

    Responses counted for the failure rate: checkpoint and live queries; write failures always fail the run.
    """
    case = prepare(config, retriever, dataset, qids)
    fig, live_rows = run_case(case, echo)
    responses = fig.live.queries + sum(r.latency.n for c in fig.checkpoints for r in c.filters)
    failed = len({(f["phase"], f.get("qid"), f["t_s"]) for f in case.failures if f["phase"] in ("live", "checkpoint")})
    writes_failed = sum(f["phase"] == "write" for f in case.failures)
    rate = failed / responses if responses else 0.0
    summary.streaming = fig
    summary.requests = responses
    summary.failed = failed
    summary.failure_rate = rate
    summary.failures_recorded = len(case.failures)
    summary.first_failure = Failure(case.failures[0]) if case.failures else None
    summary.complete = writes_failed == 0
    summary.stopped = "a write failed; the stream stopped there" if writes_failed else None
    over = rate > config.stress.allowed_failure_rate or writes_failed > 0
    summary.exit_code = EXIT_BACKEND if over else EXIT_OK
    write_jsonl(out / "stream_queries.jsonl", [q.to_dict() for q in live_rows])
    write_jsonl(out / "failures.jsonl", case.failures, ensure_ascii=True)
    write_stress(out, summary)
    write_text(out / "report.md", render_markdown(summary))
    write_text(out / "report.html", render_html(summary, live_rows))
    return summary
