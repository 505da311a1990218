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
everything else is written; nothing is retried into success or filled in. A system that fails as a
whole (cannot be built, indexed or searched) is recorded as such and shown beside the others.

Each cell runs the stages of `studies/cell.py`: the rerank stage (`studies/rerank.py`), then the
scoring stage (`BenchmarkScorer`: the judging stage of `studies/judging.py` when judged metrics are
asked, then one `evaluate`). The finish step, the same for `retbench run` and a Python caller of
`run_experiment`, writes metrics.json, manifest.json, report.md and report.html from what the cells
hold in memory, and registers the run in the history (`studies/finish.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from retbench.config import (
    DatasetSpec,
    ExperimentModel,
    SystemSpec,
    load,
    validate,
)
from retbench.data import Queries, Run
from retbench.data.answers import SystemAnswer
from retbench.data.samples import groups_from_samples
from retbench.errors import ConfigError, InputError
from retbench.evaluation import EvalSettings, Evaluation, evaluate
from retbench.llm.generate import GenerateSpec, GeneratingRetriever, Generator
from retbench.metrics.agreement import reference_agreement
from retbench.metrics.registry import parse_metric
from retbench.report.drilldown import curve_means, curve_metrics
from retbench.results import SystemDir
from retbench.results.layout import OutputLock, cell_keys
from retbench.results.model import DatasetTexts, StudyManifest, StudyResult
from retbench.results.read import FolderTables
from retbench.results.write import write_results
from retbench.retrievers.base import Retriever, check_system, create
from retbench.retrievers.filters import query_filters, require_filters
from retbench.retrievers.rerank import RerankSpec, parse_rerank
from retbench.studies.cell import (
    Cell,
    CellData,
    CellStages,
    Executor,
    LazyRetriever,
    Outcome,
    Progress,
    Scored,
    StudyOutcome,
    fingerprint,
    raise_if_backend_failed,
    run_cell,
)
from retbench.studies.dataset import (
    PreparedData,
    dataset_manifest,
    load_prepared,
    prepare_dataset,
    require_relevant,
)
from retbench.studies.executors import ExecutorSettings, make_executor, parse_executor
from retbench.studies.finish import register_history, write_reports
from retbench.studies.judging import JudgeServer, JudgeStage, JudgingSpec, judged_metrics, judged_summary
from retbench.studies.manifest import manifest_header
from retbench.studies.rerank import RerankStage

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
        model.evaluation.to_settings(),
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


# -- running -----------------------------------------------------------------------------------
def _agreement(
    reference: str,
    k: int,
    runs: dict[str, Run | None],
    queries: Queries,
) -> dict[str, dict[str, Any]]:
    """Each system's overlap@k with the reference system's run (overall and on filtered queries), by key.

    `runs` holds each system's final run by key (None: the system failed as a whole). Nothing is
    measured when the reference failed: its error is in metrics.json.
    """
    ref_run = runs.get(reference)
    if ref_run is None:
        return {}
    qids = list(queries)
    filtered = {q for q, f in zip(qids, query_filters(queries, qids), strict=True) if f is not None}
    return {
        key: reference_agreement(run, ref_run, qids, k, reference_name=reference, filtered=filtered)
        for key, run in runs.items()
        if key != reference and run is not None
    }


def _system(spec: SystemSpec, key: str, sysdir: SystemDir, where: str, generate: GenerateSpec | None) -> Retriever:
    """The retriever of one cell; with a `generate:` block it also answers each query (llm/generate.py)."""
    retriever = create(spec.adapter, spec.params, name=key, where=where)
    if generate is None:
        return retriever
    return GeneratingRetriever(retriever, Generator(generate, log_path=sysdir.root / "generate_calls.jsonl"))


@dataclass
class BenchmarkScorer:
    """A benchmark cell's scoring stage (`studies.cell.Scorer`): judged when asked, then evaluated.

    A golden set (samples) brings per-sample k, reference answers and answerable flags; the
    system's answers come from the cell in memory.
    """

    data: PreparedData
    metrics: list[str]
    settings: EvalSettings
    judge: JudgeStage | None = None
    curves: bool = False  # also the report's metric@k curves, in the same evaluation

    def evaluate(self, run: Run, metrics: Sequence[str]) -> Evaluation:
        """Score a run on the dataset's qrels with the study's settings (the rerank stage's first-stage table)."""
        return evaluate(run, self.data.qrels, metrics, self.settings)

    def __call__(self, run: Run, answers: Mapping[str, SystemAnswer]) -> Scored:
        samples = self.data.dataset.samples
        if not samples and self.curves:  # one evaluation; the stored table keeps the config's metrics
            names = curve_metrics(run)
            ev = self.evaluate(run, [*self.metrics, *names])
            return Scored(ev.select(self.metrics), curves=curve_means(ev, names))
        if not samples:
            return Scored(self.evaluate(run, self.metrics))
        given = dict(answers) or None
        judged = None
        if self.judge is not None:
            queries = self.data.queries
            judged = self.judge(
                self.metrics, run, {q: queries[q] for q in queries}, samples, answers, self.data.dataset.corpus
            )
        ev = evaluate(
            run,
            self.data.qrels,
            self.metrics,
            self.settings,
            samples=samples,
            texts=self.data.dataset.corpus,
            answers=given,
            judged=judged.records if judged else None,
        )
        if judged is None:
            return Scored(ev)
        block = judged_summary(ev, judged.manifest, samples, given, judged.records)
        return Scored(ev, judge=block or None)


def run_experiment(
    config: ExperimentConfig | str | Path,
    *,
    force: bool = False,
    progress: Progress | None = None,
    log: Callable[[str], None] = print,
    history: bool = True,
    tag: str | None = None,
) -> StudyOutcome[ExperimentConfig]:
    """Run every system on every dataset through the cell runner; write the results directory and its report.

    Writes metrics.json, manifest.json, report.md and report.html, and (unless `history` is False)
    registers the run in the history (`tag` marks it, e.g. as a gate baseline). Whatever fails,
    what was computed is written first; the caller decides the exit (`raise_if_backend_failed`).
    `config` is a parsed config or the path of an experiment YAML file.
    """
    cfg = config if isinstance(config, ExperimentConfig) else load_config(config)
    executor = make_executor(cfg.executor)
    server = JudgeServer(cfg.judging.llm) if cfg.judging else None  # started on the first verdict asked
    prepared: list[PreparedData] = []  # each dataset as loaded, for the report's drill-down
    try:
        with OutputLock(cfg.output):
            outcome = _run_locked(cfg, executor, server, prepared, force=force, progress=progress, log=log)
    finally:
        executor.close()
        if server is not None:
            server.close()
    outcome.reports = write_reports(cfg.output, outcome, log)
    if history:
        register_history(outcome.result, cfg.raw.get("history"), tag, log)
    return outcome


def _run_locked(
    cfg: ExperimentConfig,
    executor: Executor,
    server: JudgeServer | None,
    prepared: list[PreparedData],
    *,
    force: bool,
    progress: Progress | None,
    log: Callable[[str], None],
) -> StudyOutcome[ExperimentConfig]:
    out = cfg.output
    outcomes: list[Outcome] = []
    manifest: dict[str, Any] = {
        **manifest_header(cfg.source, cfg.raw, name=cfg.name),
        "evaluation": cfg.evaluation.to_dict(),
        "metrics": list(cfg.metrics),
        "executor": dict(cfg.executor.__dict__),
        "datasets": [],
        "systems": {},
    }
    # a cell finished earlier is skipped: its table and run are read from the folder when asked for
    result = StudyResult(StudyManifest(manifest), {}, out)
    result.source = FolderTables(out, result.manifest)
    try:
        for dspec, systems in cfg.cells():
            data = load_prepared(dspec)
            require_relevant(data.qrels, cfg.evaluation, data.dataset.path, dspec.split)
            prepared.append(data)
            manifest["datasets"].append(data.manifest())
            done: list[Outcome] = []
            for key, sspec in systems:
                outcome = _run_system(cfg, executor, server, data, key, sspec, force=force, progress=progress, log=log)
                done.append(outcome)
                _add(result, outcome)
            outcomes += done
            if cfg.reference is not None:
                keys = {s.name: key for key, s in systems}
                runs = {o.name: None if o.index_error else result.run(o.name) for o in done}
                for key, block in _agreement(keys[cfg.reference], cfg.reference_k, runs, data.queries).items():
                    result.systems[key].reference = block
    finally:  # what finished is written even when a later dataset cannot be read
        if result.systems:
            write_results(out, result)
    if len(prepared) == 1:  # the drill-down shows one dataset's documents
        one = prepared[0]
        result.texts = DatasetTexts(one.qrels, one.dataset.corpus, {q: one.queries[q] for q in one.queries})
    return StudyOutcome(cfg, outcomes, result)


def _add(result: StudyResult, outcome: Outcome) -> None:
    """A cell's result (and its tables, when computed now) into the study's."""
    result.systems[outcome.name] = outcome.system
    if outcome.result is not None:
        result.tables[outcome.name] = outcome.result
    if outcome.manifest:
        result.manifest.data["systems"][outcome.name] = outcome.manifest


def _run_system(
    cfg: ExperimentConfig,
    executor: Executor,
    server: JudgeServer | None,
    data: PreparedData,
    key: str,
    sspec: SystemSpec,
    *,
    force: bool,
    progress: Progress | None,
    log: Callable[[str], None],
) -> Outcome:
    """One system on one dataset through the cell runner, with its rerank and judging stages."""
    rr = cfg.reranks.get(sspec.name)
    sysdir = SystemDir.of(cfg.output, key)
    cell = Cell(
        key,
        sysdir,
        cfg.search_fingerprint(sspec, data.spec),
        cfg.system_hash(sspec, data.spec),
        max(cfg.depth, rr.depth) if rr else cfg.depth,
        cfg.batch_size,
        manifest={"adapter": sspec.adapter},
        search_extra={"adapter": sspec.adapter, "params": sspec.params},
    )
    judge = None
    if cfg.judging is not None and server is not None and judged_metrics(cfg.metrics):
        judge = JudgeStage(cfg.judging, server, sysdir.root)
    # a golden set's per-sample k would cut the curves' own k: its curves are computed by the report
    scorer = BenchmarkScorer(data, cfg.metrics, cfg.evaluation, judge, curves=len(cfg.datasets) == 1)
    cdata = CellData(
        data.dataset.corpus,
        data.queries,
        groups_from_samples(data.dataset.samples) if data.dataset.samples else None,
    )
    rerank = RerankStage(rr, cdata, sysdir, cfg.metrics, scorer.evaluate, key, cfg.source) if rr else None
    make = partial(_system, sspec, key, sysdir, cfg.source, cfg.generates.get(sspec.name))
    lazy = LazyRetriever(partial(_filtered_system, make, data.queries))
    try:
        return run_cell(
            cell,
            lazy,
            cdata,
            CellStages(scorer, rerank, aggregate=cfg.evaluation.aggregate_kwargs()),
            executor=executor,
            force=force,
            progress=progress,
            log=log,
        )
    finally:
        lazy.close()


def _filtered_system(make: Callable[[], Retriever], queries: Queries) -> Retriever:
    """The cell's retriever, refused before paying for an index when the queries carry filters it cannot apply."""
    retriever = make()
    try:
        require_filters(retriever, query_filters(queries, list(queries)))
    except BaseException:
        retriever.close()
        raise
    return retriever
