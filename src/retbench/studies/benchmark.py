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

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from retbench.config import (
    DatasetSpec,
    EvalSettings,
    ExperimentModel,
    SystemSpec,
    load,
    sample_ids,
    validate,
)
from retbench.data import Dataset, Queries, Run
from retbench.data.samples import groups_from_samples
from retbench.errors import ConfigError, InputError
from retbench.evaluation import evaluate
from retbench.io.datasets import load_dataset
from retbench.llm.generate import GenerateSpec, GeneratingRetriever, Generator
from retbench.metrics.agreement import reference_agreement
from retbench.metrics.registry import parse_metric
from retbench.results import SystemDir, load_run, write_json
from retbench.results.files import load_answers
from retbench.results.layout import OutputLock, cell_keys
from retbench.retrievers.base import check_system, create
from retbench.retrievers.filters import query_filters, require_filters
from retbench.retrievers.rerank import RerankSpec, parse_rerank
from retbench.studies.cell import (
    Cell,
    LazyRetriever,
    Outcome,
    Progress,
    StudyOutcome,
    fingerprint,
    raise_if_backend_failed,
    run_cell,
)
from retbench.studies.executors import ExecutorSettings, make_executor, parse_executor
from retbench.studies.judging import (
    JudgeServer,
    Judging,
    JudgingSpec,
    judged_metrics,
    judged_summary,
)
from retbench.studies.manifest import manifest_header
from retbench.studies.rerank import rerank_system

__all__ = [
    "DatasetSpec",
    "ExperimentConfig",
    "SystemSpec",
    "dataset_manifest",
    "load_config",
    "parse_config",
    "prepare_dataset",
    "raise_if_backend_failed",
    "run_experiment",
]

# kept for callers of the earlier names: one outcome shape serves every study
SystemOutcome = Outcome
ExperimentOutcome = StudyOutcome


@dataclass
class ExperimentConfig:
    name: str
    output: Path
    datasets: list[DatasetSpec]
    systems: list[SystemSpec]
    metrics: list[str]
    depth: int = 100
    batch_size: int = 64
    evaluation: EvalSettings = field(default_factory=EvalSettings)
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    keys: list[list[str]] = field(default_factory=list)  # keys[i][j]: system j on dataset i
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)
    reranks: dict[str, RerankSpec] = field(default_factory=dict)  # by system name
    reference: str | None = None  # a system (exact search) whose top-k the others are measured against
    reference_k: int = 10
    generates: dict[str, GenerateSpec] = field(default_factory=dict)  # by system name: answers from a chat model
    judging: JudgingSpec | None = None  # the judge of the judged answer metrics (studies/judging.py)

    def search_fingerprint(self, system: SystemSpec, dataset: DatasetSpec) -> str:
        """What the ranked lists depend on (the journal must match it): system, data, depth."""
        return fingerprint({"system": system.to_dict(), "dataset": dataset.__dict__, "depth": self.depth})

    def system_hash(self, system: SystemSpec, dataset: DatasetSpec) -> str:
        """What a finished cell's numbers depend on: resume only reuses results with the same hash."""
        judged = {"judging": self.judging.describe()} if self.judging and judged_metrics(self.metrics) else {}
        return fingerprint(
            {
                "search": self.search_fingerprint(system, dataset),
                "metrics": self.metrics,
                "evaluation": self.evaluation.to_dict(),
                **judged,
            }
        )

    def cells(self) -> list[tuple[DatasetSpec, list[tuple[str, SystemSpec]]]]:
        """(dataset, [(key, system), ...]) in run order."""
        return [(d, list(zip(self.keys[i], self.systems, strict=True))) for i, d in enumerate(self.datasets)]


def parse_config(raw: Any, source: str = "<config>", output: str | Path | None = None) -> ExperimentConfig:
    """Validate an experiment mapping (`config.ExperimentModel`); every error names the field."""
    return build_config(validate(ExperimentModel, raw, source), raw, source, output)


def build_config(
    model: ExperimentModel, raw: dict[str, Any], source: str, output: str | Path | None = None
) -> ExperimentConfig:
    """The experiment a validated model describes; adapters and stages are checked here, before any work."""
    datasets = [d.to_spec(model.seed) for d in model.datasets]
    raw_systems = raw["systems"]
    systems = []
    for i, s in enumerate(model.systems):
        check_system(s.adapter, s.params, source, f"systems[{i}]")
        systems.append(s.to_spec(**{k: raw_systems[i][k] for k in ("rerank", "generate") if k in raw_systems[i]}))
    name = model.name or Path(source).stem
    out = Path(output) if output is not None else Path(model.output or f"results/{name}")
    keys = cell_keys([(d.label, d.split) for d in datasets], [s.name for s in systems], source)
    cfg = ExperimentConfig(
        name,
        out,
        datasets,
        systems,
        list(model.metrics),
        model.depth,
        model.batch_size,
        model.evaluation,
        source,
        raw,
        keys,
    )
    cfg.metrics = canonical_metrics(cfg.metrics, model.evaluation.default_k, source)
    cfg.executor = parse_executor(raw.get("executor"), source)
    if model.reference is not None:
        cfg.reference, cfg.reference_k = model.reference.system, model.reference.k
    cutoffs = [parse_metric(m, model.evaluation.default_k).k or model.depth for m in cfg.metrics]
    for i, (sm, spec) in enumerate(zip(model.systems, systems, strict=True)):
        if sm.rerank is not None:
            cfg.reranks[spec.name] = parse_rerank(
                spec.extra["rerank"], cutoffs, where=source, fld=f"systems[{i}].rerank"
            )
        if sm.generate is not None:  # the validated block: its model file is already resolved
            block = sm.generate.model_dump(exclude_unset=True)
            try:
                cfg.generates[spec.name] = GenerateSpec.from_config(block, where=f"systems[{i}].generate")
            except ConfigError as exc:
                raise ConfigError(exc.reason, path=source, field=exc.field) from None
    if model.judge is not None:
        cfg.judging = JudgingSpec.from_config(raw["judge"], raw.get("judging"), source)
    return cfg


def canonical_metrics(metrics: list[str], default_k: int, source: str, where: str = "metrics") -> list[str]:
    """Registry names of the metrics (ndcg_cut_10 -> ndcg@10); an unknown one names its field."""

    out = []
    for i, m in enumerate(metrics):
        try:
            out.append(parse_metric(m, default_k).name)
        except InputError as exc:
            raise ConfigError(exc.reason, path=source, field=f"{where}[{i}]") from None
    return out


def load_config(path: str | Path, output: str | Path | None = None) -> ExperimentConfig:
    """Read and validate an experiment YAML file (errors name file:line and field)."""
    return load(path, parse_config, output)


# -- preparing data ----------------------------------------------------------------------------
def prepare_dataset(spec: DatasetSpec) -> tuple[Dataset, Queries]:
    """Load a dataset and select its judged queries (optionally a seeded slice and a smaller corpus).

    `corpus_sample: N` keeps every document judged for the selected queries plus random others up to
    N documents: scores on such a slice are for a quick look, not for comparison with published ones.
    """

    ds = load_dataset(spec.spec, [spec.split], join_rule=spec.join_rule)
    qrels = ds.split(spec.split)
    qids = [q for q in qrels if q in ds.queries]
    if not qids:
        raise InputError(
            f"split {spec.split!r} has no judged query (its qrels are empty or name no known query)",
            path=ds.path,
            field="split",
        )
    rng = random.Random(spec.seed)
    qids = sample_ids(qids, spec.max_queries, rng)
    if spec.corpus_sample and spec.corpus_sample < len(ds.corpus):
        keep = {d for q in qids for d in qrels[q] if d in ds.corpus}
        others = [d for d in ds.corpus.ids if d not in keep]
        keep.update(rng.sample(others, max(0, spec.corpus_sample - len(keep))))
        corpus = ds.corpus.subset([d for d in ds.corpus.ids if d in keep])
        ds = Dataset(ds.name, corpus, ds.queries, {spec.split: qrels.subset(qids)}, ds.path, ds.problems, ds.samples)
    else:
        ds = Dataset(ds.name, ds.corpus, ds.queries, {spec.split: qrels.subset(qids)}, ds.path, ds.problems, ds.samples)
    return ds, ds.queries.subset(qids)


# -- running -----------------------------------------------------------------------------------
def _add_agreement(
    cfg: ExperimentConfig, systems: list[tuple[str, SystemSpec]], queries: Queries, metrics_json: dict[str, Any]
) -> None:
    """Each system's overlap@k with the reference system's saved run (overall and on filtered queries)."""
    keys = {s.name: key for key, s in systems}
    ref_key = keys[str(cfg.reference)]
    if "error" in metrics_json.get(ref_key, {}):
        return  # the reference failed to index: nothing to measure against (its error is in metrics.json)
    reference = load_run(SystemDir.of(cfg.output, ref_key), ref_key)
    qids = list(queries)
    filtered = {q for q, f in zip(qids, query_filters(queries, qids), strict=True) if f is not None}
    for key in keys.values():
        summary = metrics_json.get(key)
        if key == ref_key or not isinstance(summary, dict) or "error" in summary:
            continue
        run = load_run(SystemDir.of(cfg.output, key), key)
        summary["reference"] = reference_agreement(
            run, reference, qids, cfg.reference_k, reference_name=ref_key, filtered=filtered
        )


def dataset_manifest(ds: Dataset, dspec: DatasetSpec, queries: Queries, load_seconds: float) -> dict[str, Any]:
    """A dataset's entry in a study's manifest.json (the fingerprints let compare refuse other data)."""
    qrels = ds.split(dspec.split)
    return {
        "name": ds.name,
        "path": ds.path,
        "split": dspec.split,
        "documents": len(ds.corpus),
        "queries": len(queries),
        "corpus_fingerprint": ds.corpus.fingerprint(),
        "qrels_fingerprint": qrels.fingerprint(),
        "join_rule": ds.corpus.join_rule,
        "max_queries": dspec.max_queries,
        "corpus_sample": dspec.corpus_sample,
        "load_seconds": round(load_seconds, 3),
        "problems": ds.problems,
    }


def _require_relevant(qrels: Any, settings: EvalSettings, path: str, split: str) -> None:
    """Refuse a split whose every query would be skipped: its means would be over no query at all."""
    if settings.no_relevant != "skip":
        return
    level = settings.relevance_level
    if not any(g >= level for q in qrels for g in qrels[q].values()):
        raise InputError(
            f"split {split!r} judges no document relevant (grade >= {level}), so every query would be skipped; "
            "use another split or set evaluation.no_relevant",
            path=path,
            field="split",
        )


def _system(cfg: ExperimentConfig, spec: SystemSpec, key: str) -> Any:
    """The retriever of one cell; with a `generate:` block it also answers each query (llm/generate.py)."""
    retriever = create(spec.adapter, spec.params, name=key, where=cfg.source)
    gen = cfg.generates.get(spec.name)
    if gen is None:
        return retriever
    log = SystemDir.of(cfg.output, key).root / "generate_calls.jsonl"
    return GeneratingRetriever(retriever, Generator(gen, log_path=log))


def _rerank_hook(rr: RerankSpec, queries: Queries, corpus: Any, cell: Cell, cfg: ExperimentConfig, qrels: Any) -> Any:
    """The cell runner's rerank stage: (first-stage run) -> (reranked run, summary block, manifest block)."""

    def score(run: Run, metrics: Sequence[str]) -> Any:
        return evaluate(run, qrels, metrics, **cfg.evaluation.evaluate_kwargs())

    def hook(run: Any) -> Any:
        return rerank_system(rr, run, queries, corpus, cell.sysdir, cfg.metrics, score, name=cell.key, where=cfg.source)

    return hook


def run_experiment(
    cfg: ExperimentConfig, *, force: bool = False, progress: Progress | None = None, log: Callable[[str], None] = print
) -> StudyOutcome:
    """Run every system on every dataset through the cell runner; write the results directory."""
    executor = make_executor(cfg.executor)
    server = JudgeServer(cfg.judging.llm) if cfg.judging else None  # started on the first verdict asked
    try:
        with OutputLock(cfg.output):
            return _run_locked(cfg, executor, server, force=force, progress=progress, log=log)
    finally:
        executor.close()
        if server is not None:
            server.close()


def _scorer(
    cfg: ExperimentConfig,
    server: JudgeServer | None,
    key: str,
    qrels: Any,
    ds: Dataset,
    queries: Queries,
    js: dict[str, Any],
) -> Callable[[Run], Any]:
    """A cell's score(run): answers read back, judged when asked (figures into `js`), then evaluated."""

    def score(run: Run) -> Any:
        extra: dict[str, Any] = {}
        judged = None
        if ds.samples:  # a golden set: per-sample k, reference answers, answerable flags
            answers = load_answers(SystemDir.of(cfg.output, key))
            judged, js["manifest"] = _judge_system(cfg, server, key, run, ds, queries, answers)
            extra = {"samples": ds.samples, "texts": ds.corpus, "answers": answers or None, "judged": judged}
        ev = evaluate(run, qrels, cfg.metrics, **cfg.evaluation.evaluate_kwargs(), **extra)
        if judged is not None:
            js["summary"] = judged_summary(ev, js["manifest"], ds.samples, extra["answers"], judged)
        return ev

    return score


def _judge_block(js: dict[str, Any], retriever: Any, timings: dict[str, float]) -> dict[str, Any]:
    """The cell summary's `judge` block (calls, tokens, cost, judged N of M), when the stage ran."""
    return {"judge": js["summary"]} if js.get("summary") else {}


def _judge_system(
    cfg: ExperimentConfig, server: JudgeServer | None, key: str, run: Run, ds: Dataset, queries: Queries, answers: Any
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The judging stage for one system (stored verdicts by query, its manifest); (None, {}) when not asked."""
    if cfg.judging is None or server is None or not judged_metrics(cfg.metrics):
        return None, {}
    k = cfg.judging.context_k
    contexts = {
        q: [str(d) for d in run.docs(q)[:k] if str(d) in ds.corpus] if q in run and not run.status[q].failed else []
        for q in queries
    }
    stage = Judging(cfg.judging, server, SystemDir.of(cfg.output, key).root)
    records = stage.run(
        cfg.metrics,
        {q: queries[q] for q in queries},
        ds.samples,
        answers,
        contexts,
        lambda d: ds.corpus.joined(ds.corpus.index[d]),
    )
    return records, stage.manifest()


def _run_locked(
    cfg: ExperimentConfig,
    executor: Any,
    server: JudgeServer | None,
    *,
    force: bool,
    progress: Progress | None,
    log: Callable[[str], None],
) -> StudyOutcome:

    out = cfg.output
    outcomes: list[Outcome] = []
    metrics_json: dict[str, Any] = {}
    manifest: dict[str, Any] = {
        **manifest_header(cfg.source, cfg.raw, name=cfg.name),
        "evaluation": cfg.evaluation.to_dict(),
        "executor": dict(cfg.executor.__dict__),
        "datasets": [],
        "systems": {},
    }
    for dspec, systems in cfg.cells():
        t0 = time.perf_counter()
        ds, queries = prepare_dataset(dspec)
        qrels = ds.split(dspec.split)
        _require_relevant(qrels, cfg.evaluation, ds.path, dspec.split)
        manifest["datasets"].append(dataset_manifest(ds, dspec, queries, time.perf_counter() - t0))

        for key, sspec in systems:
            judge_summary: dict[str, Any] = {}  # the judging stage's figures, kept in the cell's summary
            score = _scorer(cfg, server, key, qrels, ds, queries, judge_summary)
            cell = Cell(
                key,
                SystemDir.of(out, key),
                cfg.search_fingerprint(sspec, dspec),
                cfg.system_hash(sspec, dspec),
                max(cfg.depth, rr.depth) if (rr := cfg.reranks.get(sspec.name)) else cfg.depth,
                cfg.batch_size,
            )
            lazy = LazyRetriever(partial(_system, cfg, sspec, key))
            if not cell.sysdir.is_done(cell.cell_hash) or force:
                require_filters(lazy(), query_filters(queries, list(queries)))  # before paying for an index
            try:
                outcome = run_cell(
                    cell,
                    lazy,
                    ds.corpus,
                    queries,
                    score,
                    aggregate=cfg.evaluation.aggregate_kwargs(),
                    force=force,
                    progress=progress,
                    log=log,
                    manifest={"adapter": sspec.adapter},
                    executor=executor,
                    search_extra={"adapter": sspec.adapter, "params": sspec.params},
                    rerank=_rerank_hook(rr, queries, ds.corpus, cell, cfg, qrels) if rr else None,
                    extra=partial(_judge_block, judge_summary),
                    groups=groups_from_samples(ds.samples) if ds.samples else None,
                )
            finally:
                lazy.close()
            outcomes.append(outcome)
            metrics_json[key] = outcome.summary
            if outcome.manifest:
                manifest["systems"][key] = outcome.manifest
        if cfg.reference is not None:
            _add_agreement(cfg, systems, queries, metrics_json)
    write_json(out / "metrics.json", metrics_json)
    write_json(out / "manifest.json", manifest)
    return StudyOutcome(cfg, outcomes, metrics_json)
