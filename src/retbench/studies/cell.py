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

The contract (`studies.cell_contract`): `run_cell(cell, system, data, stages)` with typed stages
(`CellStages`: an optional `RerankStage`, a `Scorer`, study-specific summary fields) that return typed results
(`Reranked`, `Scored`); the cell's summary comes back as a typed `SystemResult` (`Outcome.system`: metric values
and blocks in separate namespaces) and what it computed (run, table, answers) in `Outcome.result`,
in memory, for the study's later steps (reference agreement, the report).

A system that fails as a whole (built, indexed or searched) is recorded as the cell's `index_error`;
failures of single queries are recorded per query. Both make the study exit 3 after everything is
written (2 when the whole-system failure is a config error, e.g. a factory returning the wrong type).

A RAG system's answer side (`retriever.answers`: the http adapter's answer fields, a `generate:`
block's answers) is journaled in the same record as the query's ranking, so a killed run resumed
later still saves every query's answer exactly once (answers.jsonl is rebuilt from the journal).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retbench.data import Corpus, Queries, Run
from retbench.data.answers import SystemAnswer
from retbench.errors import ConfigError
from retbench.evaluation import Evaluation
from retbench.io.files import write_failed, write_json
from retbench.metrics.coverage import coverage
from retbench.results import SystemDir, save_run
from retbench.results.blocks import Breakdown
from retbench.results.costs import timed_search_seconds
from retbench.results.files import save_answers, save_table
from retbench.results.journal import Journal, journaled_answers
from retbench.results.model import (
    SCHEMA_VERSION,
    SystemResult,
    SystemTables,
    metric_values,
)
from retbench.results.read import read_done
from retbench.results.usage import llm_usage, stage_latency
from retbench.retrievers.base import Retriever
from retbench.retrievers.scope import ScopeRecord, corpus_views, scope_in_scope
from retbench.studies.cell_contract import (
    Cell,
    CellData,
    CellStages,
    Executor,
    Log,
    Progress,
    Reranked,
    RerankStage,
    Scored,
)
from retbench.studies.executors import Answer, InProcess, devices_of
from retbench.studies.measured import encoders_of
from retbench.studies.outcome import Outcome
from retbench.studies.resources import rate, size_on_disk, stage

# The cell's contract (Cell, CellData, CellStages, Executor, Scored, ...) is imported from studies.cell_contract
# and the outcomes from studies.outcome: this module exports the runner alone.
__all__ = ["LazyRetriever", "breakdown", "index_with", "run_cell", "search_journaled"]


# -- the runner --------------------------------------------------------------------------------------
def run_cell(
    cell: Cell,
    system: Callable[[], Retriever],
    data: CellData,
    stages: CellStages,
    *,
    executor: Executor | None = None,
    force: bool = False,
    progress: Progress | None = None,
    log: Log = print,
) -> Outcome:
    """Run one cell to done.json, or read it back when it finished earlier with the same hash.

    `system()` is called only when work is left (so a finished dense cell loads no model). A system
    that cannot be built, indexed or searched as a whole (a store at a wrong port, a factory that
    raises, a lost cluster node) is recorded as the cell's `index_error`, never raised: the other
    cells and the report still come. Failures of single queries are recorded per query.
    """
    if cell.sysdir.is_done(cell.cell_hash) and not force:
        log(f"{cell.key}: finished earlier, skipped (use --force to redo)")
        return _finished(cell)
    if force:
        for f in (cell.sysdir.journal, cell.sysdir.done, cell.sysdir.answers):
            f.unlink(missing_ok=True)
    cell.sysdir.done.unlink(missing_ok=True)
    cell.sysdir.root.mkdir(parents=True, exist_ok=True)
    outcome = Outcome(cell.key, manifest=dict(cell.manifest))
    try:
        r = system()
    except Exception as exc:  # a system that cannot be built is recorded; the others still run
        return _system_failed(cell, outcome, exc, "while starting", log)
    run = _journaled_run(r, data.queries, cell)
    if run is not None:  # every query answered before: re-score without indexing or searching again
        _finish(cell, outcome, r, run, data, stages)
        return outcome
    ex: Executor = executor if executor is not None else InProcess()
    figures: dict[str, Any] = {}
    outcome.manifest["resources"] = figures
    if progress:
        progress(f"index {cell.key}", 0, len(data.corpus))
    try:
        index_with(ex, r, data.corpus, cell.sysdir, figures)
    except Exception as exc:  # a backend failure is recorded; the other cells still run
        return _system_failed(cell, outcome, exc, "while indexing", log)
    if progress:
        progress(f"index {cell.key}", len(data.corpus), len(data.corpus))
    try:
        with stage(figures, "search"):
            run, figures["search_on"] = search_journaled(r, data.queries, cell, progress, ex)
    except Exception as exc:  # e.g. a lost cluster node: the journal keeps every answered query for a resume
        return _system_failed(cell, outcome, exc, "while searching", log)
    # over the timed search, as latency: the query-vector warm-up's seconds depend on what the cache held
    figures["search_queries_per_s"] = rate(len(data.queries), timed_search_seconds(figures)[0] or 0.0)
    outcome.timings.update({k: round(v, 3) for k, v in figures.items() if k.endswith("_seconds")})
    _finish(cell, outcome, r, run, data, stages)
    if outcome.failed_queries:
        log(f"{cell.key}: {outcome.failed_queries} queries failed; first error, {outcome.first_error}")
    return outcome


def _system_failed(cell: Cell, outcome: Outcome, exc: Exception, when: str, log: Log) -> Outcome:
    """Record a whole-system failure in the outcome (its result holds the error and no metrics)."""
    outcome.index_error = f"{type(exc).__name__}: {exc}"
    outcome.config_error = isinstance(exc, ConfigError)
    outcome.system = SystemResult(cell.key, error=outcome.index_error)
    what = "config error" if outcome.config_error else "backend failed"
    log(f"{cell.key}: {what} {when}: {outcome.index_error}")
    return outcome


def _reranked(run: Run, rerank: RerankStage | None, outcome: Outcome) -> Reranked | None:
    """The rerank stage's result (its summary and manifest blocks kept in the outcome), None without one."""
    if rerank is None:
        return None
    t0 = time.perf_counter()
    done = rerank(run)
    outcome.timings["rerank_seconds"] = round(time.perf_counter() - t0, 3)
    if done.manifest:
        outcome.manifest["rerank"] = done.manifest
    return done


def _finished(cell: Cell) -> Outcome:
    done = read_done(cell.sysdir, cell.key)
    return Outcome(
        cell.key,
        skipped=True,
        failed_queries=done.failed_queries,
        first_error=done.first_error,
        timings=done.timings,
        system=done.result,
        manifest=done.manifest,
    )


def _finish(cell: Cell, outcome: Outcome, retriever: Retriever, first: Run, data: CellData, stages: CellStages) -> None:
    """Rerank, save the run, score it, build the cell's `SystemResult` once, write done.json last."""
    reranked = _reranked(first, stages.rerank, outcome)
    run = reranked.run if reranked is not None else first
    failed = run.failed()
    outcome.failed_queries = len(failed)
    if failed:
        outcome.first_error = f"query {failed[0]}: {run.errors.get(failed[0], run.status[failed[0]].value)}"
    t0 = time.perf_counter()
    scopes = _scopes_of(cell, run) if scope_records(retriever) is not None else None
    save_run(run, cell.sysdir, {q: {"scope": r.to_dict()} for q, r in (scopes or {}).items()})
    answers = _answers_of(cell, run) if retriever.answers is not None else {}
    if answers:
        save_answers(answers, cell.sysdir)
    inside = scope_in_scope(scopes, corpus_views(data.corpus)) if scopes else None  # none recorded: no stage
    scored = stages.score(run, answers, scopes=inside)
    evaluation = scored.evaluation
    save_table(evaluation, cell.sysdir)
    aggregates = evaluation.aggregate(**stages.aggregate)
    write_json(cell.sysdir.aggregates, aggregates)
    outcome.timings["evaluate_seconds"] = round(time.perf_counter() - t0, 3)
    outcome.system = _system_result(
        cell, outcome, retriever, run, data, stages, scored, reranked, aggregates, answers, scopes
    )
    outcome.manifest = {
        **outcome.manifest,
        **scored.manifest,
        "describe": retriever.describe(),
        "fingerprint": retriever.fingerprint(),
        "timings": outcome.timings,
        "config_hash": cell.cell_hash,
        "search_fingerprint": cell.search_fingerprint,
        "duplicates_dropped": run.n_duplicates,
    }
    outcome.result = SystemTables(evaluation, run, answers, scored.curves)
    write_json(
        cell.sysdir.done,
        {
            "schema_version": SCHEMA_VERSION,
            "config_hash": cell.cell_hash,
            "result": outcome.system.to_dict(),
            "manifest": outcome.manifest,
            "failed_queries": outcome.failed_queries,
            "first_error": outcome.first_error,
            "timings": outcome.timings,
        },
    )


def _system_result(
    cell: Cell,
    outcome: Outcome,
    retriever: Retriever,
    run: Run,
    data: CellData,
    stages: CellStages,
    scored: Scored,
    reranked: Reranked | None,
    aggregates: Mapping[str, Mapping[str, Any]],
    answers: Mapping[str, SystemAnswer],
    scopes: Mapping[str, Any] | None = None,
) -> SystemResult:
    """The cell's typed result: metric values (canonical names, as in per_query.tsv) and its blocks, apart."""
    evaluation = scored.evaluation
    resources = outcome.manifest.get("resources")
    searched = resources.get("search_on") if isinstance(resources, Mapping) else None
    rerank = reranked.manifest if reranked is not None else None
    latency = stage_latency(run, answers, outcome.timings, scopes=scopes, searched=searched, rerank=rerank)
    return SystemResult(
        cell.key,
        metric_values(aggregates, evaluation.metrics),
        coverage=coverage(evaluation, run, reranked.depth if reranked is not None else cell.depth),
        latency=latency,
        judge=scored.judge,
        first_stage=reranked.first_stage if reranked is not None else None,
        rerank=reranked.rerank if reranked is not None else None,
        breakdown=breakdown(evaluation, data.groups, run) if data.groups else None,
        usage=llm_usage(cell.sysdir.root) or None,
        resources=dict(resources) if isinstance(resources, Mapping) else None,
        extra=stages.describe(retriever, outcome.timings) if stages.describe is not None else None,
    )


def breakdown(evaluation: Evaluation, groups: Mapping[str, Sequence[str]], run: Run | None = None) -> Breakdown:
    """{group: {"n": counted queries in it, "means": {metric: mean over those it applies to}, "rates": {error,
    timeout, empty: share of the group's queries with that status}}}, empty groups left out."""
    sizes, means = evaluation.group_sizes(groups), evaluation.breakdown(groups)
    out: Breakdown = {g: {"n": sizes[g], "means": means[g]} for g in groups if sizes[g]}
    if run is not None:
        status = run.status
        for g, block in out.items():
            qids = [q for q in groups[g] if q in status]
            block["rates"] = {
                s: sum(status[q].value == s for q in qids) / len(qids) if qids else 0.0
                for s in ("error", "timeout", "empty")
            }
    return out


def _answers_of(cell: Cell, run: Run) -> dict[str, SystemAnswer]:
    """The answer side of the run's queries as journaled (this process's and any earlier one's), run order."""
    if not cell.sysdir.journal.is_file():
        return {}
    with Journal(cell.sysdir.journal, cell.search_fingerprint, batch_size=cell.batch_size) as journal:
        found = journaled_answers(journal)
    return {q: found[q] for q in run.query_ids if q in found}


def scope_records(retriever: Retriever) -> dict[str, ScopeRecord] | None:
    """The scope records a scoped retriever (or an http service reporting its scope) fills as it searches, also
    under a generating wrapper; None for a retriever with no scope stage."""
    for r in (retriever, retriever.inner):
        if r is not None and r.scopes is not None:  # ScopedRetriever.scopes, HttpRetriever.scopes
            return r.scopes  # type: ignore[return-value]  # ScopeRecord values: what the scope stage fills
    return None


def _scopes_of(cell: Cell, run: Run) -> dict[str, ScopeRecord]:
    """Each query's scope record as journaled (this process's and any earlier one's), run order."""
    if not cell.sysdir.journal.is_file():
        return {}
    with Journal(cell.sysdir.journal, cell.search_fingerprint, batch_size=cell.batch_size) as journal:
        found: dict[str, dict[str, Any]] = {}
        for r in journal.records(lambda r: isinstance(r.get("scope"), dict)):
            found.setdefault(r["qid"], r["scope"])  # the first record of a query wins, as in replay
    return {q: ScopeRecord.from_dict(found[q]) for q in run.query_ids if q in found}


def _journaled_run(retriever: Retriever, queries: Queries, cell: Cell) -> Run | None:
    """The complete run from the journal when every query is in it (None otherwise)."""
    if not cell.sysdir.journal.is_file():
        return None
    with Journal(cell.sysdir.journal, cell.search_fingerprint, batch_size=cell.batch_size) as journal:
        if not set(queries) <= journal.done():
            return None
        run = journal.replay(name=retriever.name)
    return run.subset(list(queries))


def search_journaled(
    retriever: Retriever,
    queries: Queries,
    cell: Cell,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> tuple[Run, dict[str, Any]]:
    """Search in batches wherever the executor runs them; only this process journals, each query once.

    Resumes from the journal: queries already in it are not searched again. Returns the run and where
    the search ran (executor kind and workers).
    """
    ex: Executor = executor if executor is not None else InProcess()
    label = f"search {cell.key}"
    with Journal(cell.sysdir.journal, cell.search_fingerprint, batch_size=cell.batch_size) as journal:
        done = journal.done()
        todo = [q for q in queries if q not in done]
        total, answered = len(queries), [len(queries) - len(todo)]
        if progress:
            progress(label, answered[0], total)

        said = retriever.answers if retriever.answers is not None else {}  # a RAG system's, filled by its search
        records = scope_records(retriever)  # filled by the scoped search as it answers (the same dict)
        scoped = records if records is not None else {}

        def on_batch(part: list[Answer]) -> None:
            for q, ranking, status, latency, error, batch in part:
                if q not in journal:  # a batch retried after a worker died is journaled once
                    answer = {"answer": said[q].to_dict()} if q in said else {}
                    if q in scoped:
                        answer["scope"] = scoped[q].to_dict()
                    journal.append_query(
                        q, q, ranking, status=status, latency=latency, error=error, latency_batch=batch, **answer
                    )
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
            **dict(cell.search_extra),
        )
        run = journal.replay(name=retriever.name)
    return run.subset(list(queries)), where


def index_with(
    executor: Executor, retriever: Retriever, corpus: Corpus, sysdir: SystemDir, figures: dict[str, Any]
) -> None:
    """Encode (through the executor, into the embedding cache), index, and save the index where it can be.

    The saved index is what Ray search workers load; its size is a resource figure either way.
    """
    with stage(figures, "encode"):
        figures["encode_on"] = executor.encode_corpus(retriever, corpus)
    figures["encode_docs_per_s"] = figures["encode_on"].pop("encode_docs_per_s", None)
    # the vectors the cache could have held: fewer encoded means the encode seconds price only part of the work
    figures["encode_on"]["of"] = len(corpus) * sum(1 for e in encoders_of(retriever) if e.use_cache)
    with stage(figures, "index"):
        retriever.index(corpus)
    figures["index_docs_per_s"] = rate(len(corpus), figures["index_seconds"])
    figures["devices"] = devices_of(retriever, *figures["encode_on"].get("devices", []))
    if {"save", "load"} <= retriever.capabilities:
        try:
            retriever.save(sysdir.root / "index")
        except OSError as exc:  # a full disk: name the folder the person can free, not a library's inner file
            raise write_failed(sysdir.root / "index", exc) from None
        figures["index_bytes"] = size_on_disk(sysdir.root / "index")


class LazyRetriever:
    """Creates a retriever on first use (a finished cell never loads its model) and closes it once."""

    def __init__(self, make: Callable[[], Retriever]) -> None:
        self._make = make
        self.value: Retriever | None = None

    def __call__(self) -> Retriever:
        if self.value is None:
            self.value = self._make()
        return self.value

    def close(self) -> None:
        if self.value is not None:
            self.value.close()
            self.value = None
