"""The stress study runner: ingest, drive every level (resuming from the journal), write the results folder."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from retbench.config import StressModel
from retbench.data import Dataset, Qrels, Run
from retbench.errors import EXIT_BACKEND, EXIT_OK, ConfigError
from retbench.evaluation import Evaluation, evaluate
from retbench.io.files import write_jsonl, write_text
from retbench.metrics.settings import EvalSettings
from retbench.report.stress import level_line, render_html, render_markdown
from retbench.results import SystemDir, save_run
from retbench.results.journal import Journal
from retbench.results.stress import (
    JournalFigures,
    LevelFigures,
    LevelQuality,
    MetricMeans,
    StressSummary,
    WarmUp,
    write_stress,
)
from retbench.results.stress_figures import Failure
from retbench.retrievers.base import Retriever, create
from retbench.retrievers.faults import with_faults
from retbench.studies.dataset import prepare_dataset
from retbench.studies.executors import devices_of
from retbench.studies.resources import stage
from retbench.studies.stress.drivers import drive, uses_async
from retbench.studies.stress.figures import ingest, level_run, summarize_level
from retbench.studies.stress.stream_study import STREAM_FILES, run_streaming
from retbench.studies.stress.validate import FAILURE_OUTCOMES


# -- quality on the stressed responses -------------------------------------------------------------
def quality(
    run: Run,
    qrels: Qrels,
    query_ids: Sequence[str],
    metrics: Sequence[str],
    evaluation: EvalSettings | None = None,
) -> tuple[LevelQuality, Evaluation]:
    """Metric means over the stressed query set: failed or unasked queries count 0, nothing imputed.

    "scored N of M": N queries answered (ok or empty) of the M judged ones. The success-only mean
    is over those N and is only ever shown labelled as such. Returns (figures, the Evaluation).
    """
    judged = [q for q in query_ids if q in qrels]
    # always counted the trec_eval way: a failed query under stress scores 0, it is never left out
    settings = replace(evaluation or EvalSettings(), mode="trec_eval")
    ev = evaluate(run, qrels.subset(judged), list(metrics), settings, system=run.name)
    ok = np.array([s in ("ok", "empty") for s in ev.status], dtype=bool)
    means: dict[str, MetricMeans] = {}
    for m in metrics:
        col = ev.column(m)
        means[m] = MetricMeans(float(col.mean()) if len(col) else None, float(col[ok].mean()) if ok.any() else None)
    return LevelQuality(int(ok.sum()), len(ev.query_ids), len(ev.skipped), ev.status_counts(), means), ev


# -- the whole thing -------------------------------------------------------------------------------
OUTPUT_FILES = (
    "journal.jsonl",
    "summary.json",
    "failures.jsonl",
    "run.trec",
    "status.jsonl",
    "per_query.tsv",
    "report.md",
    "report.html",
)


@dataclass
class StressResult:
    """How a stress run ended: its exit code, its typed summary (what summary.json holds), where it wrote."""

    exit_code: int
    summary: StressSummary
    out_dir: Path

    @property
    def first_failure(self) -> Failure | None:
        return self.summary.first_failure


def build_retriever(config: StressModel) -> Retriever:
    """The configured system, wrapped in a FaultyRetriever when the config asks for faults."""

    system = config.system
    r = create(system.adapter, system.params, name=system.label, where=config.source)
    return with_faults(r, system.faults)


class _Stress:
    """State of one `run_stress` call: the journal, the summary being built, and the files written."""

    def __init__(self, config: StressModel, out: Path, retriever: Retriever, dataset: Dataset, qids: list[str]) -> None:
        self.config, self.out, self.retriever, self.ds, self.qids = config, out, retriever, dataset, qids
        self.s = config.stress
        self.qrels = dataset.split(config.dataset.split)
        self.journal = Journal(
            out / "journal.jsonl",
            config.fingerprint(),
            batch_size=1 << 30,
            meta={"system": retriever.name, "dataset": dataset.name},
        )
        self.ingest_failures: list[Failure] = []
        faults = config.system.faults
        self.summary = StressSummary(
            system=retriever.name,
            adapter=config.system.adapter,
            faults=faults.model_dump(exclude_unset=True) if faults else None,
            dataset=dataset.name,
            split=config.dataset.split,
            queries=len(qids),
            corpus=len(dataset.corpus),
            k=config.k,
            metrics=config.metric_names,
            settings=self.s.model_dump(),
            mode="async" if uses_async(retriever, self.s) else "threads",
            resumed=len(self.journal) > 0,
        )

    def save(self, stop_reason: str | None) -> None:
        """Write summary.json, failures.jsonl and report.md from everything journaled so far."""
        recs = self.journal.records()
        fails = self.ingest_failures + [Failure(f) for r in recs for f in r.get("failures", ())]
        write_jsonl(self.out / "failures.jsonl", (f.to_dict() for f in fails), ensure_ascii=True)
        requests = [r for r in recs if "outcome" in r]
        failed = sum(r["outcome"] in FAILURE_OUTCOMES for r in requests) + len(self.ingest_failures)
        sm = self.summary
        sm.requests = len(requests)
        sm.attempts = sum(int(r["attempts"]) for r in requests)
        sm.failed = failed
        sm.failure_rate = failed / len(requests) if requests else (1.0 if failed else 0.0)
        sm.failures_recorded = len(fails)
        sm.first_failure = fails[0] if fails else None
        sm.stopped = stop_reason
        sm.journal = JournalFigures(len(self.journal), self.journal.torn, self.journal.duplicates)
        over = failed / max(len(requests), 1) > self.s.allowed_failure_rate or bool(self.ingest_failures)
        sm.exit_code = EXIT_BACKEND if over else EXIT_OK
        write_stress(self.out, sm)
        write_text(self.out / "report.md", render_markdown(sm))
        write_text(self.out / "report.html", render_html(sm))

    def _measure(self, c: int) -> list[dict[str, Any]]:
        return self.journal.records(lambda r: r.get("level") == c and r.get("phase") == "measure")

    def level(self, c: int) -> tuple[LevelFigures, Run, Evaluation]:
        """Run (or, when journaled as done, replay) one concurrency level; returns its figures."""
        s, j = self.s, self.journal
        ids, n = self.ds.corpus, len(self.ds.corpus)
        if f"{c}:done" not in j:
            seg = uuid.uuid4().hex[:8]
            info: dict[str, Any] = {"stopped": None}
            if s.warmup:
                info = drive(
                    self.retriever,
                    self.ds.queries,
                    self.qids,
                    self.config.k,
                    ids,
                    n,
                    s,
                    c,
                    j,
                    phase="warmup",
                    count=s.warmup,
                    seg=seg,
                )
            if not info["stopped"]:
                info = drive(self.retriever, self.ds.queries, self.qids, self.config.k, ids, n, s, c, j, seg=seg)
            j.append(f"{c}:done", type="level_done", level=c, stopped=info["stopped"])
            j.flush()
        done = j.records(lambda r: r.get("key") == f"{c}:done")[0]
        recs = self._measure(c)
        fig = summarize_level(recs, c, None if s.duration_s is not None else (s.requests or len(self.qids)))
        warm = j.records(lambda r: r.get("level") == c and r.get("phase") == "warmup")
        fig.warmup = WarmUp(len(warm), sum(r["outcome"] in FAILURE_OUTCOMES for r in warm))
        fig.stopped = done.get("stopped")
        run = level_run(recs, name=self.retriever.name)
        fig.quality, ev = quality(
            run, self.qrels, self.qids, self.config.metric_names, self.config.evaluation.to_settings()
        )
        return fig, run, ev


def _warnings(retriever: Retriever) -> list[str]:
    inner_retries = retriever.describe().get("retries")
    if isinstance(inner_retries, int) and inner_retries > 0:
        return [
            f"adapter {retriever.adapter!r} retries internally ({inner_retries}x): those retries are invisible to stress; "
            "set its retries to 0 and use stress.retries so every attempt is recorded"
        ]
    return []


def run_stress(
    config: StressModel,
    *,
    out_dir: str | Path | None = None,
    fresh: bool = False,
    retriever: Retriever | None = None,
    dataset: Dataset | None = None,
    echo: Callable[[str], None] = print,
) -> StressResult:
    """Ingest, drive every level, and write summary.json, failures.jsonl, the last level's run, report.md.

    `retriever` and `dataset` may be given directly (tests, notebooks: every judged query of the
    dataset is used); otherwise both come from the config. Resumes from `journal.jsonl` in the
    output folder unless `fresh`. Never raises for a backend failure: the exit code says it.
    """

    out = Path(out_dir or config.output_dir)
    if fresh or config.stress.streaming is not None:  # the streaming case is never resumed: it starts again
        for name in (*OUTPUT_FILES, *STREAM_FILES):
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    if dataset is None:
        dataset, queries = prepare_dataset(config.dataset)
        qids = list(queries)
    else:
        qrels = dataset.split(config.dataset.split)
        qids = [q for q in dataset.queries if q in qrels]
    if not qids:
        raise ConfigError(
            f"no judged queries in split {config.dataset.split!r}", path=config.source, field="datasets[0].split"
        )
    own = retriever is None
    # not `retriever or ...`: a store with nothing indexed yet has len() 0 and is falsy
    retriever = retriever if retriever is not None else build_retriever(config)
    st = _Stress(config, out, retriever, dataset, qids)
    s = config.stress
    st.summary.warnings = _warnings(retriever)
    for w in st.summary.warnings:
        echo(f"warning: {w}")
    try:
        if s.streaming is not None:  # search while the data changes, instead of the concurrency levels
            st.summary.case = "streaming"
            return _finish(run_streaming(config, retriever, dataset, qids, out, st.summary, echo), out, echo)
        echo(f"ingesting {len(dataset.corpus)} documents into {retriever.name}")
        res: dict[str, object] = {"devices": devices_of(retriever)}
        st.summary.resources = res  # filled by each stage as it ends
        with stage(res, "ingest"):
            st.summary.ingest = ing = ingest(retriever, dataset.corpus, s.ingest_batch_size)
        res["index_docs_per_s"] = ing.docs_per_s
        if ing.first_failure is not None:
            st.ingest_failures.append(ing.first_failure)
            st.save("ingestion failed: no query was sent to a backend whose writes fail")
            return _finish(st.summary, out, echo)
        stop: str | None = None
        last: tuple[Run, Evaluation] | None = None
        for c in s.levels:
            echo(
                f"concurrency {c}: warm-up {s.warmup}, then "
                + (f"{s.duration_s} s" if s.duration_s else f"{s.requests or len(qids)} requests")
            )
            with stage(res, f"level_{c}"):
                fig, run, ev = st.level(c)
            st.summary.levels.append(fig)
            last = (run, ev)
            echo(level_line(fig))
            stop = fig.stopped
            st.save(stop)
            rate = st.summary.failure_rate
            if not stop and s.stop_on_failure and rate > s.allowed_failure_rate and c != s.levels[-1]:
                stop = f"failure rate {rate:.2%} exceeds the allowed {s.allowed_failure_rate:.2%}; later levels not run"
            if stop:
                break
        if last is not None:
            save_run(last[0], SystemDir(out))
            last[1].to_tsv(out / "per_query.tsv")
        st.summary.complete = stop is None
        st.save(stop)
        return _finish(st.summary, out, echo)
    finally:
        st.journal.close()
        if own:
            retriever.close()


def _finish(summary: StressSummary, out: Path, echo: Callable[[str], None]) -> StressResult:
    echo(f"results in {out}")
    return StressResult(summary.exit_code, summary, out)
