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
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from retbench.config import DatasetSpec, ExperimentModel
from retbench.config.experiment import ExperimentSystem, GenerateBlock
from retbench.config.study import load_study, parse_study
from retbench.data import Queries, Run
from retbench.data.answers import SystemAnswer
from retbench.data.samples import groups_from_samples
from retbench.errors import ConfigError
from retbench.evaluation import Evaluation, evaluate
from retbench.evaluation.curves import curve_means, curve_metrics
from retbench.llm.generate import GeneratingRetriever, Generator
from retbench.llm.prompts import load_prompt
from retbench.metrics.agreement import reference_agreement
from retbench.metrics.settings import EvalSettings
from retbench.results import SystemDir
from retbench.results.layout import OutputLock, cell_keys
from retbench.results.model import DatasetTexts, StudyManifest, StudyResult
from retbench.results.read import FolderTables
from retbench.results.write import write_results
from retbench.retrievers.base import Retriever, check_system, create
from retbench.retrievers.filters import query_filters, require_filters
from retbench.retrievers.rerank import check_rerank
from retbench.retrievers.scope import with_scope
from retbench.studies.cell import LazyRetriever, run_cell
from retbench.studies.cell_contract import Cell, CellData, CellStages, Executor, Progress, Scored, fingerprint
from retbench.studies.dataset import (
    PreparedData,
    dataset_manifest,
    doc_type_groups,
    load_prepared,
    prepare_dataset,
    require_relevant,
)
from retbench.studies.executors import make_executor
from retbench.studies.finish import register_history, write_reports
from retbench.studies.judging import (
    JudgeServer,
    JudgeStage,
    check_judging,
    judged_summary,
    judging_identity,
    stage_metrics,
)
from retbench.studies.llm_calls import failed_llm_stages, partial_llm_stages
from retbench.studies.manifest import manifest_header
from retbench.studies.outcome import Outcome, StudyOutcome, raise_if_backend_failed
from retbench.studies.rerank import RerankStage
from retbench.studies.rubrics import asked_rubrics, rubric_estimates

__all__ = [
    "DatasetSpec",
    "ExperimentModel",
    "check_experiment",
    "dataset_manifest",
    "load_config",
    "parse_config",
    "prepare_dataset",
    "raise_if_backend_failed",
    "run_experiment",
    "system_retriever",
]


# -- the config: `config.ExperimentModel`, checked against what it names ---------------------------------
def check_experiment(cfg: ExperimentModel) -> None:
    """Check what the model alone cannot, before any work: adapters against their factories, rerankers,
    prompt templates, and that every (dataset, system) cell has a results key of its own."""
    source = cfg.source
    for i, s in enumerate(cfg.systems):
        check_system(s.adapter, s.params, source, f"systems[{i}]")
        if s.rerank is not None:
            check_rerank(s.rerank, where=source, fld=f"systems[{i}].rerank")
        if s.generate is not None:
            try:
                load_prompt(s.generate.prompt)
            except ConfigError as exc:
                raise ConfigError(exc.reason, path=source, field=f"systems[{i}].generate.prompt") from None
    if cfg.judge is not None:
        check_judging(cfg.judging_settings, source)
    cell_keys_of(cfg)


def parse_config(data: Any, source: str = "<config>", output: str | Path | None = None) -> ExperimentModel:
    """Validate an experiment mapping (`config.ExperimentModel`) and check it; every error names the field."""
    return parse_study(data, source, ExperimentModel, output, check_experiment)


def load_config(path: str | Path, output: str | Path | None = None) -> ExperimentModel:
    """Read and validate an experiment YAML file (errors name file:line and field)."""
    return load_study(path, ExperimentModel, output, check_experiment)


def cell_keys_of(cfg: ExperimentModel) -> list[list[str]]:
    """keys[i][j]: the results key of system j on dataset i (`results.layout`)."""
    return cell_keys([(d.label, d.split) for d in cfg.dataset_specs], [s.label for s in cfg.systems], cfg.source)


def cells(cfg: ExperimentModel) -> list[tuple[DatasetSpec, list[tuple[str, ExperimentSystem]]]]:
    """(dataset, [(key, system), ...]) in run order."""
    keys = cell_keys_of(cfg)
    return [(d, list(zip(keys[i], cfg.systems, strict=True))) for i, d in enumerate(cfg.dataset_specs)]


def search_fingerprint(cfg: ExperimentModel, system: ExperimentSystem, dataset: DatasetSpec) -> str:
    """What the ranked lists depend on (the journal must match it): system, data, depth."""
    return fingerprint({"system": system.identity(), "dataset": dataset.__dict__, "depth": cfg.depth})


def system_hash(cfg: ExperimentModel, system: ExperimentSystem, dataset: DatasetSpec) -> str:
    """What a finished cell's numbers depend on: resume only reuses results with the same hash."""
    metrics = cfg.metric_names
    rubrics = asked_rubrics(metrics, cfg.rubrics)
    judged = (
        {"judging": judging_identity(cfg.judge, cfg.judging_settings, rubrics)}
        if stage_metrics(cfg.judge, metrics, rubrics)
        else {}
    )
    return fingerprint(
        {
            "search": search_fingerprint(cfg, system, dataset),
            "metrics": metrics,
            "evaluation": cfg.evaluation.to_settings().to_dict(),
            **judged,
        }
    )


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


def _system(system: ExperimentSystem, key: str, sysdir: SystemDir, where: str) -> Retriever:
    """The retriever of one cell; with a `generate:` block it also answers each query (llm/generate.py)."""
    retriever = create(system.adapter, system.params, name=key, where=where)
    retriever = with_scope(retriever, system.scope)
    generate: GenerateBlock | None = system.generate
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

    def evaluate(
        self, run: Run, metrics: Sequence[str], scopes: Mapping[str, Callable[[str], bool]] | None = None
    ) -> Evaluation:
        """Score a run on the dataset's qrels with the study's settings (the rerank stage's first-stage table)."""
        return evaluate(run, self.data.qrels, metrics, self.settings, scopes=scopes)

    def __call__(
        self, run: Run, answers: Mapping[str, SystemAnswer], scopes: Mapping[str, Callable[[str], bool]] | None = None
    ) -> Scored:
        samples = self.data.dataset.samples
        if not samples and self.curves:  # one evaluation; the stored table keeps the config's metrics
            names = curve_metrics(run)
            ev = self.evaluate(run, [*self.metrics, *names], scopes)
            return Scored(ev.select(self.metrics), curves=curve_means(ev, names))
        if not samples:
            return Scored(self.evaluate(run, self.metrics, scopes))
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
            scopes=scopes,
        )
        if judged is None:
            return Scored(ev)
        ev.estimates = rubric_estimates(ev, samples)  # PPI where people gave verdicts on some samples
        block = judged_summary(ev, judged.manifest, samples, given, judged.records)
        return Scored(ev, judge=block or None)


def run_experiment(
    config: ExperimentModel | str | Path,
    *,
    force: bool = False,
    progress: Progress | None = None,
    log: Callable[[str], None] = print,
    history: bool = True,
    tag: str | None = None,
) -> StudyOutcome[ExperimentModel]:
    """Run every system on every dataset through the cell runner; write the results directory and its report.

    Writes metrics.json, manifest.json, report.md and report.html, and (unless `history` is False)
    registers the run in the history (`tag` marks it, e.g. as a gate baseline). Whatever fails,
    what was computed is written first; the outcome says what failed (failed systems; `llm_failures`: LLM stages
    whose every call failed, read back from their call logs; `llm_notes`: stages where only some did) and its
    `exit_code`; `raise_if_failed(outcome)` raises the error `retbench run` exits with.
    `config` is a validated config (`load_config`, `parse_config`) or the path of an experiment YAML file.
    """
    cfg = config if isinstance(config, ExperimentModel) else load_config(config)
    executor = make_executor(cfg.executor)
    server = JudgeServer(cfg.judge) if cfg.judge is not None else None  # started on the first verdict asked
    prepared: list[PreparedData] = []  # each dataset as loaded, for the report's drill-down
    try:
        with OutputLock(cfg.output_dir):
            outcome = _run_locked(cfg, executor, server, prepared, force=force, progress=progress, log=log)
    finally:
        executor.close()
        if server is not None:
            server.close()
    outcome.reports = write_reports(cfg.output_dir, outcome, log)
    keys = [s.name for s in outcome.systems]
    outcome.llm_failures = failed_llm_stages(cfg.output_dir, keys)
    outcome.llm_notes = partial_llm_stages(cfg.output_dir, keys)
    if history:
        register_history(outcome.result, cfg.history, tag, log)
    return outcome


def _run_locked(
    cfg: ExperimentModel,
    executor: Executor,
    server: JudgeServer | None,
    prepared: list[PreparedData],
    *,
    force: bool,
    progress: Progress | None,
    log: Callable[[str], None],
) -> StudyOutcome[ExperimentModel]:
    out = cfg.output_dir
    outcomes: list[Outcome] = []
    manifest: dict[str, Any] = {
        **manifest_header(cfg, name=cfg.study_name),
        "evaluation": cfg.evaluation.to_settings().to_dict(),
        "metrics": cfg.metric_names,
        "executor": cfg.executor.model_dump(),
        "datasets": [],
        "systems": {},
    }
    # a cell finished earlier is skipped: its table and run are read from the folder when asked for
    result = StudyResult(StudyManifest(manifest), {}, out)
    result.source = FolderTables(out, result.manifest)
    try:
        for dspec, systems in cells(cfg):
            data = load_prepared(dspec)
            require_relevant(data.qrels, cfg.evaluation.to_settings(), data.dataset.path, dspec.split)
            prepared.append(data)
            manifest["datasets"].append(data.manifest())
            done: list[Outcome] = []
            for key, sspec in systems:
                outcome = _run_system(cfg, executor, server, data, key, sspec, force=force, progress=progress, log=log)
                done.append(outcome)
                _add(result, outcome)
            outcomes += done
            if cfg.reference is not None:
                keys = {s.label: key for key, s in systems}
                runs = {o.name: None if o.index_error else result.run(o.name) for o in done}
                ref = cfg.reference
                for key, block in _agreement(keys[ref.system], ref.k, runs, data.queries).items():
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
    cfg: ExperimentModel,
    executor: Executor,
    server: JudgeServer | None,
    data: PreparedData,
    key: str,
    system: ExperimentSystem,
    *,
    force: bool,
    progress: Progress | None,
    log: Callable[[str], None],
) -> Outcome:
    """One system on one dataset through the cell runner, with its rerank and judging stages."""
    rr = system.rerank
    metrics, settings = cfg.metric_names, cfg.evaluation.to_settings()
    sysdir = SystemDir.of(cfg.output_dir, key)
    cell = Cell(
        key,
        sysdir,
        search_fingerprint(cfg, system, data.spec),
        system_hash(cfg, system, data.spec),
        max(cfg.depth, rr.depth) if rr else cfg.depth,
        cfg.batch_size,
        manifest={"adapter": system.adapter},
        search_extra={"adapter": system.adapter, "params": system.params},
    )
    judge = None
    rubrics = asked_rubrics(metrics, cfg.rubrics)
    if stage_metrics(cfg.judge, metrics, rubrics):  # the experiment's judge, or only rubrics with their own
        judge = JudgeStage(cfg.judge, cfg.judging_settings, server, sysdir.root, rubrics)
    # a golden set's per-sample k would cut the curves' own k: its curves are computed by the report
    scorer = BenchmarkScorer(data, metrics, settings, judge, curves=len(cfg.datasets) == 1)
    groups = {
        **(groups_from_samples(data.dataset.samples) if data.dataset.samples else {}),
        **doc_type_groups(data.qrels, data.dataset.corpus),
    }
    cdata = CellData(data.dataset.corpus, data.queries, groups or None)
    rerank = RerankStage(rr, cdata, sysdir, metrics, scorer.evaluate, key, cfg.source) if rr else None
    make = partial(_system, system, key, sysdir, cfg.source)
    lazy = LazyRetriever(partial(_filtered_system, make, data.queries))
    try:
        return run_cell(
            cell,
            lazy,
            cdata,
            CellStages(scorer, rerank, aggregate=settings.aggregate_kwargs()),
            executor=executor,
            force=force,
            progress=progress,
            log=log,
        )
    finally:
        lazy.close()


def system_retriever(system: ExperimentSystem, key: str, sysdir: SystemDir, source: str, queries: Queries) -> Retriever:
    """One system's retriever as a benchmark cell builds it (scope, answer side, query filters checked), for a
    study that searches with the experiment's systems without scoring them (the label study pools their runs)."""
    return _filtered_system(partial(_system, system, key, sysdir, source), queries)


def _filtered_system(make: Callable[[], Retriever], queries: Queries) -> Retriever:
    """The cell's retriever, refused before paying for an index when the queries carry filters it cannot apply."""
    retriever = make()
    try:
        require_filters(retriever, query_filters(queries, list(queries)))
    except BaseException:
        retriever.close()
        raise
    return retriever
