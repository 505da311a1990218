"""YAML experiment → systems × datasets → a results directory; resumable.

    name: scifact
    output: results/scifact
    depth: 100                     # documents retrieved per query
    metrics: [ndcg@10, recall@100, mrr@10, map, recall@5]
    evaluation: {relevance_level: 1, no_relevant: skip, mode: trec_eval, default_k: 5}
    datasets:
      - {name: scifact, split: test}          # a shipped name, a BEIR folder, or hf:<name>
    systems:
      - {name: bm25, adapter: bm25s, params: {k1: 1.5, b: 0.75}}

Each system's per-query results are journaled as they arrive, so a killed run started again redoes
no finished query; a finished system (done.json with the same config hash) is skipped unless forced.
A backend failure is recorded per query with its message verbatim and makes the run exit 3 after
everything else is written; nothing is retried into success or filled in.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.data import Dataset, Queries, Run
from retbench.errors import BackendError, ConfigError, InputError
from retbench.evaluation import evaluate
from retbench.io.datasets import load_dataset
from retbench.io.files import read_yaml
from retbench.metrics.registry import DEFAULT_METRICS, parse_metric
from retbench.results import SystemDir, save_run, write_json
from retbench.results.journal import Journal
from retbench.retrievers.base import create, resolve_factory
from retbench.retrievers.filters import query_filters, require_filters
from retbench.retrievers.rerank import parse_rerank
from retbench.studies.executors import ExecutorSettings, encoders_of, make_executor, parse_executor
from retbench.studies.manifest import config_record, machine, package_versions
from retbench.studies.rerank import rerank_system
from retbench.studies.resources import rate, size_on_disk, stage

TOP_KEYS = {
    "name",
    "output",
    "depth",
    "metrics",
    "evaluation",
    "datasets",
    "systems",
    "batch_size",
    "seed",
    "description",
    "history",
    "executor",
}
DATASET_KEYS = {"name", "path", "split", "max_queries", "corpus_sample", "join_rule", "seed"}
SYSTEM_KEYS = {"name", "adapter", "params", "rerank"}
EVAL_KEYS = {"relevance_level", "no_relevant", "mode", "default_k", "bootstrap", "seed", "ignore_identical_ids"}


@dataclass
class DatasetSpec:
    spec: str
    split: str = "test"
    max_queries: int | None = None
    corpus_sample: int | None = None
    join_rule: str = "title_space_text"
    seed: int = 0

    @property
    def label(self) -> str:
        """The dataset's column in a leaderboard and the first part of its results keys ("<label>/<system>")."""
        name = Path(self.spec).name if "/" in self.spec else self.spec.removeprefix("hf:")
        return name if self.split == "test" else f"{name}-{self.split}"


@dataclass
class SystemSpec:
    name: str
    adapter: str
    params: dict[str, Any] = field(default_factory=dict)
    rerank: Any = None  # a RerankSpec (retrievers/rerank) when the system reranks its first stage


@dataclass
class ExperimentConfig:
    name: str
    output: Path
    datasets: list[DatasetSpec]
    systems: list[SystemSpec]
    metrics: list[str]
    depth: int = 100
    batch_size: int = 64
    evaluation: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)

    def system_hash(self, system: SystemSpec, dataset: DatasetSpec) -> str:
        """What a finished system's results depend on: resume only reuses results with the same hash."""
        blob = json.dumps(
            {
                "system": {k: v for k, v in system.__dict__.items() if v is not None},
                "dataset": dataset.__dict__,
                "depth": self.depth,
                "metrics": self.metrics,
                "evaluation": self.evaluation,
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _require(cond: bool, msg: str, path: str, fld: str) -> None:
    if not cond:
        raise ConfigError(msg, path=path, field=fld)


def _unknown_keys(obj: dict, allowed: set[str], path: str, where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise ConfigError(
            f"unknown key {extra[0]!r}; allowed: {', '.join(sorted(allowed))}", path=path, field=f"{where}{extra[0]}"
        )


def parse_config(raw: Any, source: str = "<config>", output: str | Path | None = None) -> ExperimentConfig:
    """Validate an experiment mapping; every error names the field."""
    _require(isinstance(raw, dict), "an experiment config must be a mapping", source, "<top>")
    _unknown_keys(raw, TOP_KEYS, source, "")
    datasets_raw = raw.get("datasets")
    _require(isinstance(datasets_raw, list) and len(datasets_raw) > 0, "list at least one dataset", source, "datasets")
    datasets = []
    for i, d in enumerate(datasets_raw):
        if isinstance(d, str):
            d = {"name": d}
        _require(isinstance(d, dict), "a dataset is a name or a mapping", source, f"datasets[{i}]")
        _unknown_keys(d, DATASET_KEYS, source, f"datasets[{i}].")
        spec = d.get("path") or d.get("name")
        _require(isinstance(spec, str) and bool(spec), "give a dataset name or path", source, f"datasets[{i}].name")
        for key in ("max_queries", "corpus_sample"):
            v = d.get(key)
            _require(
                v is None or (isinstance(v, int) and v > 0),
                "must be a positive integer",
                source,
                f"datasets[{i}].{key}",
            )
        datasets.append(
            DatasetSpec(
                spec=spec,
                split=str(d.get("split", "test")),
                max_queries=d.get("max_queries"),
                corpus_sample=d.get("corpus_sample"),
                join_rule=d.get("join_rule", "title_space_text"),
                seed=int(d.get("seed", raw.get("seed", 0))),
            )
        )
    systems_raw = raw.get("systems")
    _require(isinstance(systems_raw, list) and len(systems_raw) > 0, "list at least one system", source, "systems")
    systems = []
    seen: set[str] = set()
    for i, s in enumerate(systems_raw):
        _require(isinstance(s, dict), "a system is a mapping with 'adapter'", source, f"systems[{i}]")
        _unknown_keys(s, SYSTEM_KEYS, source, f"systems[{i}].")
        adapter = s.get("adapter")
        _require(isinstance(adapter, str) and bool(adapter), "missing adapter", source, f"systems[{i}].adapter")
        name = str(s.get("name") or adapter)
        _require(name not in seen, f"duplicate system name {name!r}", source, f"systems[{i}].name")
        _require(
            not re.search(r"[/\\\x00-\x1f\x7f]", name) and name.strip() not in ("", ".", ".."),
            "a system name cannot be empty or contain '/', '\\' or control characters (tabs, newlines)",
            source,
            f"systems[{i}].name",
        )
        seen.add(name)
        params = s.get("params") or {}
        _require(isinstance(params, dict), "params must be a mapping", source, f"systems[{i}].params")
        systems.append(SystemSpec(name, adapter, params, s.get("rerank")))
    metrics = raw.get("metrics", DEFAULT_METRICS)
    _require(
        isinstance(metrics, list) and all(isinstance(m, str) for m in metrics) and bool(metrics),
        "metrics must be a list of names",
        source,
        "metrics",
    )
    evaluation = raw.get("evaluation") or {}
    _require(isinstance(evaluation, dict), "evaluation must be a mapping", source, "evaluation")
    _unknown_keys(evaluation, EVAL_KEYS, source, "evaluation.")
    _require(
        isinstance(evaluation.get("ignore_identical_ids", False), bool),
        "must be true or false",
        source,
        "evaluation.ignore_identical_ids",
    )
    depth = raw.get("depth", 100)
    _require(isinstance(depth, int) and depth > 0, "depth must be a positive integer", source, "depth")
    batch_size = raw.get("batch_size", 64)
    _require(
        isinstance(batch_size, int) and batch_size > 0, "batch_size must be a positive integer", source, "batch_size"
    )
    name = str(raw.get("name") or Path(source).stem)
    out = Path(output) if output is not None else Path(raw.get("output") or f"results/{name}")
    cfg = ExperimentConfig(name, out, datasets, systems, list(metrics), depth, batch_size, evaluation, source, raw)
    cfg.executor = parse_executor(raw.get("executor"), source)
    _check_metrics(cfg)
    _check_adapters(cfg)
    _check_rerank(cfg)
    return cfg


def _check_rerank(cfg: ExperimentConfig) -> None:
    """Turn each `rerank:` block into a RerankSpec; depth must reach every metric's cutoff (uncut: `depth`)."""
    default_k = int(cfg.evaluation.get("default_k", 5))
    cutoffs = [parse_metric(m, default_k).k or cfg.depth for m in cfg.metrics]
    for i, s in enumerate(cfg.systems):
        if s.rerank is not None and not hasattr(s.rerank, "depth"):
            s.rerank = parse_rerank(s.rerank, cutoffs, where=cfg.source, fld=f"systems[{i}].rerank")


def _check_metrics(cfg: ExperimentConfig) -> None:

    canonical = []
    for i, m in enumerate(cfg.metrics):
        try:
            canonical.append(parse_metric(m, int(cfg.evaluation.get("default_k", 5))).name)
        except InputError as exc:
            raise ConfigError(exc.reason, path=cfg.source, field=f"metrics[{i}]") from None
    cfg.metrics = canonical


def _check_adapters(cfg: ExperimentConfig) -> None:

    for i, s in enumerate(cfg.systems):
        try:
            resolve_factory(s.adapter)
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=cfg.source, field=f"systems[{i}].adapter") from None


def load_config(path: str | Path, output: str | Path | None = None) -> ExperimentConfig:

    return parse_config(read_yaml(path), str(path), output)


# -- preparing data ----------------------------------------------------------------------------
def prepare_dataset(spec: DatasetSpec) -> tuple[Dataset, Queries]:
    """Load a dataset and select its judged queries (optionally a seeded slice and a smaller corpus).

    `corpus_sample: N` keeps every document judged for the selected queries plus random others up to
    N documents: scores on such a slice are for a quick look, not for comparison with published ones.
    """

    ds = load_dataset(spec.spec, [spec.split], join_rule=spec.join_rule)
    qrels = ds.split(spec.split)
    qids = [q for q in qrels if q in ds.queries]
    rng = random.Random(spec.seed)
    if spec.max_queries and spec.max_queries < len(qids):
        qids = sorted(rng.sample(qids, spec.max_queries), key=qids.index)
    if spec.corpus_sample and spec.corpus_sample < len(ds.corpus):
        keep = {d for q in qids for d in qrels[q] if d in ds.corpus}
        others = [d for d in ds.corpus.ids if d not in keep]
        keep.update(rng.sample(others, max(0, spec.corpus_sample - len(keep))))
        corpus = ds.corpus.subset([d for d in ds.corpus.ids if d in keep])
        ds = Dataset(ds.name, corpus, ds.queries, {spec.split: qrels.subset(qids)}, ds.path, ds.problems)
    else:
        ds = Dataset(ds.name, ds.corpus, ds.queries, {spec.split: qrels.subset(qids)}, ds.path, ds.problems)
    return ds, ds.queries.subset(qids)


# -- running -----------------------------------------------------------------------------------
@dataclass
class SystemOutcome:
    name: str
    skipped: bool = False
    failed_queries: int = 0
    index_error: str | None = None
    first_error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class ExperimentOutcome:
    config: ExperimentConfig
    systems: list[SystemOutcome]
    metrics: dict[str, Any]

    @property
    def backend_failed(self) -> bool:
        return any(s.failed_queries or s.index_error for s in self.systems)


Progress = Callable[[str, int, int], None]


def _search_journaled(
    executor: Any,
    retriever: Any,
    sspec: SystemSpec,
    queries: Queries,
    cfg: ExperimentConfig,
    sysdir: SystemDir,
    fingerprint: str,
    progress: Progress | None,
    label: str,
    depth: int | None = None,
) -> tuple[Run, dict[str, Any]]:
    """Search in batches (wherever the executor runs them); only this process journals, each query once."""

    with Journal(sysdir.journal, fingerprint, batch_size=cfg.batch_size) as journal:
        done = journal.done()
        todo = [q for q in queries if q not in done]
        total, answered = len(queries), [len(queries) - len(todo)]
        if progress:
            progress(label, answered[0], total)

        def on_batch(part: list) -> None:
            for q, ranking, status, latency, error in part:
                if q not in journal:  # a batch retried after a worker died is journaled once
                    journal.append_query(q, q, ranking, status=status, latency=latency, error=error)
            journal.flush()
            answered[0] += len(part)
            if progress:
                progress(label, answered[0], total)

        where = executor.search(
            retriever,
            queries,
            todo,
            depth or cfg.depth,
            cfg.batch_size,
            on_batch,
            adapter=sspec.adapter,
            params=sspec.params,
            index_dir=sysdir.root / "index",
        )
        run = journal.replay(name=retriever.name)
    return run.subset(list(queries)), where


def _index_system(executor: Any, retriever: Any, corpus: Any, sysdir: SystemDir, figures: dict[str, Any]) -> None:
    """Encode (through the executor, into the embedding cache), index, and save the index where it can be.

    The saved index is what Ray search workers load; its size is a resource figure either way.
    """
    with stage(figures, "encode"):
        figures["encode_on"] = executor.encode_corpus(retriever, corpus.joined_texts())
    figures["encode_docs_per_s"] = figures["encode_on"].pop("encode_docs_per_s", None)
    with stage(figures, "index"):
        retriever.index(corpus)
    figures["index_docs_per_s"] = rate(len(corpus), figures["index_seconds"])
    devices = {e.device for e in encoders_of(retriever)} | set(figures["encode_on"].get("devices", []))
    figures["devices"] = sorted(devices) or ["cpu"]
    if {"save", "load"} <= retriever.capabilities:
        retriever.save(sysdir.root / "index")
        figures["index_bytes"] = size_on_disk(sysdir.root / "index")


def _evaluate(run: Run, qrels: Any, metrics: list[str], ev: dict[str, Any]) -> Any:
    return evaluate(
        run,
        qrels,
        metrics,
        relevance_level=int(ev.get("relevance_level", 1)),
        no_relevant=str(ev.get("no_relevant", "skip")),
        mode=str(ev.get("mode", "trec_eval")),
        default_k=int(ev.get("default_k", 5)),
        ignore_identical_ids=bool(ev.get("ignore_identical_ids", False)),
    )


def _evaluate_with(qrels: Any, ev: dict[str, Any], run: Run, metrics: list[str]) -> Any:
    return _evaluate(run, qrels, metrics, ev)


def run_experiment(
    cfg: ExperimentConfig, *, force: bool = False, progress: Progress | None = None, log: Callable[[str], None] = print
) -> ExperimentOutcome:
    """Run every system on every dataset; write the results directory; return what happened."""
    executor = make_executor(cfg.executor)
    try:
        return _run_cells(cfg, executor, force=force, progress=progress, log=log)
    finally:
        executor.close()


def _run_cells(
    cfg: ExperimentConfig, executor: Any, *, force: bool, progress: Progress | None, log: Callable[[str], None]
) -> ExperimentOutcome:

    out = cfg.output
    out.mkdir(parents=True, exist_ok=True)
    multi = len(cfg.datasets) > 1
    outcomes: list[SystemOutcome] = []
    metrics_json: dict[str, Any] = {}
    manifest: dict[str, Any] = {
        "experiment": cfg.name,
        "config": config_record(cfg.source, cfg.raw),
        "config_file": cfg.source,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": package_versions(),
        "machine": machine(),
        "executor": dict(cfg.executor.__dict__),
        "datasets": [],
        "systems": {},
    }
    ev = cfg.evaluation
    manifest["evaluation"] = {"ignore_identical_ids": bool(ev.get("ignore_identical_ids", False))}
    for dspec in cfg.datasets:
        t0 = time.perf_counter()
        ds, queries = prepare_dataset(dspec)
        qrels = ds.split(dspec.split)
        manifest["datasets"].append(
            {
                "name": ds.name,
                "path": ds.path,
                "split": dspec.split,
                "documents": len(ds.corpus),
                "queries": len(queries),
                "corpus_fingerprint": ds.corpus.fingerprint(),
                "qrels_fingerprint": hashlib.sha256(json.dumps(qrels.to_dict(), sort_keys=True).encode()).hexdigest()[
                    :16
                ],
                "join_rule": ds.corpus.join_rule,
                "max_queries": dspec.max_queries,
                "corpus_sample": dspec.corpus_sample,
                "load_seconds": round(time.perf_counter() - t0, 3),
                "problems": ds.problems,
            }
        )
        for sspec in cfg.systems:
            key = f"{dspec.label}/{sspec.name}" if multi else sspec.name
            sysdir = SystemDir(out / "systems" / key.replace("/", "__"))
            chash = cfg.system_hash(sspec, dspec)
            outcome = SystemOutcome(key)
            if sysdir.is_done(chash) and not force:
                done = json.loads(sysdir.done.read_text())
                outcome.skipped = True
                outcome.failed_queries = done.get("failed_queries", 0)
                outcome.first_error = done.get("first_error")
                outcome.timings = done.get("timings", {})
                metrics_json[key] = done["metrics"]
                manifest["systems"][key] = done["manifest"]
                outcomes.append(outcome)
                log(f"{key}: finished earlier, skipped (use --force to redo)")
                continue
            if force and sysdir.root.exists():
                for f in (sysdir.journal, sysdir.done):
                    f.unlink(missing_ok=True)
            sysdir.root.mkdir(parents=True, exist_ok=True)
            retriever = create(sspec.adapter, sspec.params, name=key, where=cfg.source)
            require_filters(retriever, query_filters(queries, list(queries)))  # before paying for an index
            figures: dict[str, Any] = {}
            try:
                if progress:
                    progress(f"index {key}", 0, len(ds.corpus))
                try:
                    _index_system(executor, retriever, ds.corpus, sysdir, figures)
                except Exception as exc:
                    outcome.index_error = f"{type(exc).__name__}: {exc}"
                    log(f"{key}: backend failed while indexing: {outcome.index_error}")
                    outcomes.append(outcome)
                    metrics_json[key] = {"error": outcome.index_error}
                    continue
                if progress:
                    progress(f"index {key}", len(ds.corpus), len(ds.corpus))
                depth = max(cfg.depth, sspec.rerank.depth) if sspec.rerank else cfg.depth
                with stage(figures, "search"):
                    run, figures["search_on"] = _search_journaled(
                        executor, retriever, sspec, queries, cfg, sysdir, chash, progress, f"search {key}", depth
                    )
                figures["search_queries_per_s"] = rate(len(queries), figures["search_seconds"])
                outcome.timings.update({k: v for k, v in figures.items() if k.endswith("_seconds")})
                rerank_summary: dict[str, Any] = {}
                rerank_manifest: dict[str, Any] | None = None
                if sspec.rerank:
                    t0 = time.perf_counter()
                    if progress:
                        progress(f"rerank {key}", 0, len(queries))
                    run, rerank_summary, rerank_manifest = rerank_system(
                        sspec.rerank,
                        run,
                        queries,
                        ds.corpus,
                        sysdir,
                        cfg.metrics,
                        functools.partial(_evaluate_with, qrels, ev),
                        name=key,
                        where=cfg.source,
                    )
                    outcome.timings["rerank_seconds"] = round(time.perf_counter() - t0, 3)
                outcome.failed_queries = len(run.failed())
                t0 = time.perf_counter()
                save_run(run, sysdir)
                evaluation = _evaluate(run, qrels, cfg.metrics, ev)
                evaluation.to_tsv(sysdir.per_query)
                aggregates = evaluation.aggregate(seed=int(ev.get("seed", 0)))
                write_json(sysdir.aggregates, aggregates)
                outcome.timings["evaluate_seconds"] = round(time.perf_counter() - t0, 3)
                counted = set(evaluation.query_ids) | set(evaluation.excluded)  # judged queries with a relevant doc
                judged = len(counted)
                failed_ids = [q for q in run.failed() if q in counted]
                missing = sum(1 for q in counted if q not in run)
                failed = len(failed_ids)
                if run.failed():
                    first = run.failed()[0]
                    outcome.first_error = f"query {first}: {run.errors.get(first, run.status[first].value)}"
                # canonical names (ndcg_cut_10 -> ndcg@10), the same as in per_query.tsv and aggregates.json
                summary: dict[str, Any] = {m: aggregates[m]["mean"] for m in evaluation.metrics}
                summary["coverage"] = {
                    "answered": judged - failed - missing,
                    "judged": judged,
                    "failed": failed,
                    "missing": missing,
                    "scored": len(evaluation.query_ids),  # the denominator of every mean
                    "skipped_no_relevant": len(evaluation.skipped),
                    "mode": evaluation.mode,
                }
                summary.update(rerank_summary)
                sys_manifest = {
                    "adapter": sspec.adapter,
                    "describe": retriever.describe(),
                    "fingerprint": retriever.fingerprint(),
                    "timings": outcome.timings,
                    "resources": figures,
                    "config_hash": chash,
                    "duplicates_dropped": run.n_duplicates,
                }
                if rerank_manifest is not None:
                    sys_manifest["rerank"] = rerank_manifest
                metrics_json[key] = summary
                manifest["systems"][key] = sys_manifest
                write_json(
                    sysdir.done,
                    {
                        "config_hash": chash,
                        "metrics": summary,
                        "manifest": sys_manifest,
                        "failed_queries": outcome.failed_queries,
                        "first_error": outcome.first_error,
                        "timings": outcome.timings,
                    },
                )
                outcomes.append(outcome)
                if failed:
                    log(f"{key}: {failed} of {judged} queries failed; first error, {outcome.first_error}")
            finally:
                retriever.close()
    write_json(out / "metrics.json", metrics_json)
    write_json(out / "manifest.json", manifest)
    return ExperimentOutcome(cfg, outcomes, metrics_json)


def raise_if_backend_failed(outcome: ExperimentOutcome) -> None:
    """Exit 3 (after everything is written) when any backend failed."""
    bad = [s for s in outcome.systems if s.failed_queries or s.index_error]
    if bad:
        s = bad[0]
        detail = s.index_error or f"{s.failed_queries} queries failed (see status.jsonl); first error, {s.first_error}"
        raise BackendError(f"backend failed for {s.name}: {detail}")
