"""The one cell runner: index -> journaled per-query search -> save -> evaluate -> coverage -> done.json.

A cell is one system on one corpus and query set (a dataset split for `retbench run`, a chunking of
the chunking set for `retbench chunking`). Every study runs its cells through `run_cell`, so all of
them journal each query as it is answered (a killed run started again redoes no finished query),
skip a finished cell (done.json with the same hash) unless forced, record failures verbatim, and
write the same files (see `retbench.results.layout`).

Two fingerprints, so fixing an unrelated setting does not throw work away:
- the *search* fingerprint (what the journal must match) covers only what changes the ranked lists:
  the system, the data and the depth; changing metrics or evaluation settings re-scores the
  journaled answers without searching again;
- the *cell* hash (what done.json must match) adds what changes the numbers: metrics, evaluation.
Batch sizes and output paths are in neither.

A backend failure while indexing is recorded as the cell's `index_error`; failures of single
queries are recorded per query. Both make the study exit 3 after everything is written.

A RAG system's answer side (`retriever.answers`: the http adapter's answer fields, a `generate:`
block's answers) is journaled in the same record as the query's ranking, so a killed run resumed
later still saves every query's answer exactly once (answers.jsonl is rebuilt from the journal).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retbench.data import Corpus, Queries, Run
from retbench.errors import BackendError
from retbench.evaluation import Evaluation, coverage
from retbench.results import SystemDir, read_json, save_run, write_json
from retbench.results.files import save_answers, save_table
from retbench.results.journal import Journal, journaled_answers
from retbench.results.usage import llm_usage, stage_latency
from retbench.studies.executors import InProcess, devices_of
from retbench.studies.resources import rate, size_on_disk, stage

Progress = Callable[[str, int, int], None]
Log = Callable[[str], None]


def fingerprint(obj: Any) -> str:
    """A short stable hash of JSON-able settings."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Cell:
    """One unit of work and where its results go."""

    key: str
    sysdir: SystemDir
    search_fingerprint: str
    cell_hash: str
    depth: int
    batch_size: int = 64


@dataclass
class Outcome:
    """What happened to one cell: the shape every study returns and the exit-3 decision reads."""

    name: str
    skipped: bool = False
    failed_queries: int = 0
    index_error: str | None = None
    first_error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # study-specific labels (e.g. chunker, system)

    @property
    def failed(self) -> bool:
        return bool(self.failed_queries or self.index_error)


@dataclass
class StudyOutcome:
    """Every cell of a study: the metrics.json content and the outcomes in run order."""

    config: Any
    systems: list[Outcome]
    metrics: dict[str, Any]

    @property
    def backend_failed(self) -> bool:
        return any(s.failed for s in self.systems)


def raise_if_backend_failed(outcome: StudyOutcome) -> None:
    """Exit 3 (after everything is written) when any backend failed."""
    bad = [s for s in outcome.systems if s.failed]
    if bad:
        s = bad[0]
        detail = s.index_error or f"{s.failed_queries} queries failed (see status.jsonl); first error, {s.first_error}"
        raise BackendError(f"backend failed for {s.name}: {detail}")


# -- the runner --------------------------------------------------------------------------------------
def run_cell(
    cell: Cell,
    retriever: Callable[[], Any],
    corpus: Corpus,
    queries: Queries,
    score: Callable[[Run], Evaluation],
    *,
    aggregate: Mapping[str, Any] | None = None,
    force: bool = False,
    progress: Progress | None = None,
    log: Log = print,
    extra: Callable[[Any, dict[str, float]], dict[str, Any]] | None = None,
    manifest: Mapping[str, Any] | None = None,
    executor: Any = None,
    search_extra: Mapping[str, Any] | None = None,
    rerank: Callable[[Run], tuple[Run, dict[str, Any], dict[str, Any] | None]] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> Outcome:
    """Run one cell to done.json, or read it back when it finished earlier with the same hash.

    `retriever()` is called only when work is left (so a finished dense cell loads no model);
    `score(run)` judges the run; `extra(retriever, timings)` adds study-specific summary fields and
    `manifest` study-specific manifest fields (both stored in done.json); `groups` (name -> query
    ids: tags, categories, answerable/unanswerable) give the summary's `breakdown`.
    """
    if cell.sysdir.is_done(cell.cell_hash) and not force:
        log(f"{cell.key}: finished earlier, skipped (use --force to redo)")
        return _finished(cell)
    if force:
        for f in (cell.sysdir.journal, cell.sysdir.done, cell.sysdir.answers):
            f.unlink(missing_ok=True)
    cell.sysdir.done.unlink(missing_ok=True)
    cell.sysdir.root.mkdir(parents=True, exist_ok=True)
    outcome = Outcome(cell.key, manifest=dict(manifest or {}))
    r = retriever()
    run = _journaled_run(r, queries, cell)
    if run is not None:  # every query answered before: re-score without indexing or searching again
        _finish(cell, outcome, r, _reranked(run, rerank, outcome), score, aggregate or {}, extra, groups)
        return outcome
    ex = executor if executor is not None else InProcess()
    figures: dict[str, Any] = {}
    outcome.manifest["resources"] = figures
    if progress:
        progress(f"index {cell.key}", 0, len(corpus))
    try:
        index_with(ex, r, corpus, cell.sysdir, figures)
    except Exception as exc:  # a backend failure is recorded; the other cells still run
        outcome.index_error = f"{type(exc).__name__}: {exc}"
        outcome.summary = {"error": outcome.index_error}
        log(f"{cell.key}: backend failed while indexing: {outcome.index_error}")
        return outcome
    if progress:
        progress(f"index {cell.key}", len(corpus), len(corpus))
    with stage(figures, "search"):
        run, figures["search_on"] = search_journaled(r, queries, cell, progress, ex, search_extra)
    figures["search_queries_per_s"] = rate(len(queries), figures["search_seconds"])
    outcome.timings.update({k: round(v, 3) for k, v in figures.items() if k.endswith("_seconds")})
    _finish(cell, outcome, r, _reranked(run, rerank, outcome), score, aggregate or {}, extra, groups)
    if outcome.failed_queries:
        log(f"{cell.key}: {outcome.failed_queries} queries failed; first error, {outcome.first_error}")
    return outcome


def _reranked(
    run: Run, rerank: Callable[[Run], tuple[Run, dict[str, Any], dict[str, Any] | None]] | None, outcome: Outcome
) -> Run:
    """The final run: the first stage's, or its rerank (whose summary and manifest blocks the outcome keeps)."""
    if rerank is None:
        return run
    t0 = time.perf_counter()
    final, summary, manifest = rerank(run)
    outcome.timings["rerank_seconds"] = round(time.perf_counter() - t0, 3)
    outcome.info["rerank_summary"] = summary
    if manifest is not None:
        outcome.manifest["rerank"] = manifest
    return final


def _finished(cell: Cell) -> Outcome:
    done = read_json(cell.sysdir.done)
    return Outcome(
        cell.key,
        skipped=True,
        failed_queries=done.get("failed_queries", 0),
        first_error=done.get("first_error"),
        timings=done.get("timings", {}),
        summary=done["metrics"],
        manifest=done["manifest"],
    )


def _finish(
    cell: Cell,
    outcome: Outcome,
    retriever: Any,
    run: Run,
    score: Callable[[Run], Evaluation],
    aggregate: Mapping[str, Any],
    extra: Callable[[Any, dict[str, float]], dict[str, Any]] | None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Save the run, score it, store the coverage, breakdown, latency and LLM usage once, write done.json last."""
    failed = run.failed()
    outcome.failed_queries = len(failed)
    if failed:
        outcome.first_error = f"query {failed[0]}: {run.errors.get(failed[0], run.status[failed[0]].value)}"
    t0 = time.perf_counter()
    save_run(run, cell.sysdir)
    answers = _answers_of(cell, run) if isinstance(getattr(retriever, "answers", None), Mapping) else {}
    if answers:
        save_answers(answers, cell.sysdir)
    evaluation = score(run)
    save_table(evaluation, cell.sysdir)
    aggregates = evaluation.aggregate(**aggregate)
    write_json(cell.sysdir.aggregates, aggregates)
    outcome.timings["evaluate_seconds"] = round(time.perf_counter() - t0, 3)
    # canonical metric names (ndcg_cut_10 -> ndcg@10), the same as in per_query.tsv and aggregates.json
    summary: dict[str, Any] = {m: aggregates[m]["mean"] for m in evaluation.metrics}
    if extra is not None:
        summary.update(extra(retriever, outcome.timings))
    summary.update(outcome.info.get("rerank_summary") or {})
    summary["coverage"] = coverage(evaluation, run)
    if groups:
        summary["breakdown"] = breakdown(evaluation, groups)
    summary["latency"] = stage_latency(run, answers, outcome.timings)
    if usage := llm_usage(cell.sysdir.root):
        summary["usage"] = usage
    outcome.summary = summary
    outcome.manifest = {
        **outcome.manifest,
        "describe": retriever.describe(),
        "fingerprint": retriever.fingerprint(),
        "timings": outcome.timings,
        "config_hash": cell.cell_hash,
        "search_fingerprint": cell.search_fingerprint,
        "duplicates_dropped": run.n_duplicates,
    }
    write_json(
        cell.sysdir.done,
        {
            "config_hash": cell.cell_hash,
            "metrics": summary,
            "manifest": outcome.manifest,
            "failed_queries": outcome.failed_queries,
            "first_error": outcome.first_error,
            "timings": outcome.timings,
        },
    )


def breakdown(evaluation: Evaluation, groups: Mapping[str, Sequence[str]]) -> dict[str, dict[str, Any]]:
    """{group: {"n": counted queries in it, "means": {metric: mean over those it applies to}}}, empty groups left out."""
    sizes, means = evaluation.group_sizes(groups), evaluation.breakdown(groups)
    return {g: {"n": sizes[g], "means": means[g]} for g in groups if sizes[g]}


def _answers_of(cell: Cell, run: Run) -> dict[str, Any]:
    """The answer side of the run's queries as journaled (this process's and any earlier one's), run order."""
    if not cell.sysdir.journal.is_file():
        return {}
    with Journal(cell.sysdir.journal, cell.search_fingerprint, batch_size=cell.batch_size) as journal:
        found = journaled_answers(journal)
    return {q: found[q] for q in run.query_ids if q in found}


def _journaled_run(retriever: Any, queries: Queries, cell: Cell) -> Run | None:
    """The complete run from the journal when every query is in it (None otherwise)."""
    if not cell.sysdir.journal.is_file():
        return None
    with Journal(cell.sysdir.journal, cell.search_fingerprint, batch_size=cell.batch_size) as journal:
        if not set(queries) <= journal.done():
            return None
        run = journal.replay(name=retriever.name)
    return run.subset(list(queries))


def search_journaled(
    retriever: Any,
    queries: Queries,
    cell: Cell,
    progress: Progress | None = None,
    executor: Any = None,
    search_extra: Mapping[str, Any] | None = None,
) -> tuple[Run, dict[str, Any]]:
    """Search in batches wherever the executor runs them; only this process journals, each query once.

    Resumes from the journal: queries already in it are not searched again. Returns the run and where
    the search ran (executor kind and workers).
    """
    ex = executor if executor is not None else InProcess()
    label = f"search {cell.key}"
    with Journal(cell.sysdir.journal, cell.search_fingerprint, batch_size=cell.batch_size) as journal:
        done = journal.done()
        todo = [q for q in queries if q not in done]
        total, answered = len(queries), [len(queries) - len(todo)]
        if progress:
            progress(label, answered[0], total)

        said = getattr(retriever, "answers", None)  # a RAG system's answer side, filled by its search
        said = said if isinstance(said, Mapping) else {}

        def on_batch(part: list) -> None:
            for q, ranking, status, latency, error in part:
                if q not in journal:  # a batch retried after a worker died is journaled once
                    answer = {"answer": said[q].to_dict()} if q in said else {}
                    journal.append_query(q, q, ranking, status=status, latency=latency, error=error, **answer)
            journal.flush()
            answered[0] += len(part)
            if progress:
                progress(label, answered[0], total)

        where = ex.search(
            retriever,
            queries,
            todo,
            cell.depth,
            cell.batch_size,
            on_batch,
            index_dir=cell.sysdir.root / "index",
            **dict(search_extra or {}),
        )
        run = journal.replay(name=retriever.name)
    return run.subset(list(queries)), where


def index_with(executor: Any, retriever: Any, corpus: Corpus, sysdir: SystemDir, figures: dict[str, Any]) -> None:
    """Encode (through the executor, into the embedding cache), index, and save the index where it can be.

    The saved index is what Ray search workers load; its size is a resource figure either way.
    """
    with stage(figures, "encode"):
        figures["encode_on"] = executor.encode_corpus(retriever, corpus)
    figures["encode_docs_per_s"] = figures["encode_on"].pop("encode_docs_per_s", None)
    with stage(figures, "index"):
        retriever.index(corpus)
    figures["index_docs_per_s"] = rate(len(corpus), figures["index_seconds"])
    figures["devices"] = devices_of(retriever, *figures["encode_on"].get("devices", []))
    if {"save", "load"} <= retriever.capabilities:
        retriever.save(sysdir.root / "index")
        figures["index_bytes"] = size_on_disk(sysdir.root / "index")


class LazyRetriever:
    """Creates a retriever on first use (a finished cell never loads its model) and closes it once."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self.value: Any = None

    def __call__(self) -> Any:
        if self.value is None:
            self.value = self._make()
        return self.value

    def close(self) -> None:
        if self.value is not None:
            self.value.close()
            self.value = None
