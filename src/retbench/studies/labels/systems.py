"""`label init --systems CONFIG.yaml`: an experiment config's systems run over the study's dataset, so the live
run and any retbench system are pooled in one step.

A trace import's folder has queries and a corpus but no qrels, so `retbench run` (which scores every cell) cannot
run on it. This runs the benchmark study's search half only, with its own parts: the config is validated as an
experiment (`benchmark.parse_config`: adapters checked against their factories, every error naming file:line
and field), each system is built as a benchmark cell builds it (`benchmark.system_retriever`), indexed through
the config's executor (`cell.index_with`: the embedding cache, the saved index) and searched with the per-query
journal (`cell.search_journaled`: a killed init started again searches no finished query again). Each system's
run is written to `STUDY/experiments/<config>/systems/<name>/run.trec`, the results layout `--systems` already
reads. The config's own `datasets:` are replaced by the study's dataset (said in a note); its metrics are not
computed. Systems with a `rerank:` or `generate:` stage are refused: their ranking needs the stage the cell
runner adds after the search (run them with `retbench run` on a dataset with qrels and pass the results directory).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from retbench.config import ExperimentModel
from retbench.config.study import load_study
from retbench.errors import ConfigError
from retbench.io.datasets import load_dataset
from retbench.io.run_files import write_run_files
from retbench.results import SystemDir
from retbench.studies.benchmark import cell_keys_of, check_experiment, search_fingerprint, system_retriever
from retbench.studies.cell import index_with, search_journaled
from retbench.studies.cell_contract import Cell
from retbench.studies.executors import make_executor

CONFIG_SUFFIXES = (".yaml", ".yml")
ANSWERED = ("ok", "empty")  # the statuses that are answers (data.status); a failed query pools nothing
EXPERIMENTS = "experiments"


def is_config(path: str | Path) -> bool:
    """Whether a `--systems` entry is an experiment config (a YAML file) rather than a results directory."""
    p = Path(path)
    return p.suffix.lower() in CONFIG_SUFFIXES and p.is_file()


def _stages_refused(cfg: ExperimentModel) -> None:
    """The experiment's own checks, then a refusal of stages a first-stage pool cannot hold."""
    check_experiment(cfg)
    for i, s in enumerate(cfg.systems):
        for stage in ("rerank", "generate"):
            if getattr(s, stage) is not None:
                raise ConfigError(
                    f"a label study pools first-stage searches: system {s.label!r} has a {stage} stage "
                    "(run it with `retbench run` and pass the results directory to --systems)",
                    path=cfg.source,
                    field=f"systems[{i}].{stage}",
                )


def run_config(
    config: str | Path,
    dataset: str | Path,
    study_dir: str | Path,
    k: int,
    note: Callable[[str], None] = print,
    *,
    own_dataset: bool = False,
) -> Path:
    """Search the config's systems over the dataset's queries and corpus; returns the results folder whose
    `systems/<name>/run.trec` hold their runs (the form `init_study` reads). `own_dataset`: the dataset is the
    config's own (a canary's query log), so no note says the config's datasets were set aside."""
    out = Path(study_dir) / EXPERIMENTS / Path(config).stem
    cfg = load_study(
        config,
        ExperimentModel,
        out,
        _stages_refused,
        what="experiment config",
        overrides={"datasets": [str(dataset)]},
    )
    if not own_dataset:
        note(f"{config}: its datasets are not used; its systems run over the study's dataset {dataset}")
    if cfg.depth < k:
        cfg = cfg.model_copy(update={"depth": k})
    ds = load_dataset(dataset)
    spec = cfg.dataset_specs[0]
    executor = make_executor(cfg.executor)
    try:
        for key, system in zip(cell_keys_of(cfg)[0], cfg.systems, strict=True):
            sysdir = SystemDir.of(out, key)
            sysdir.root.mkdir(parents=True, exist_ok=True)
            cell = Cell(
                key,
                sysdir,
                search_fingerprint(cfg, system, spec),
                "",
                cfg.depth,
                cfg.batch_size,
                search_extra={"adapter": system.adapter, "params": system.params},
            )
            retriever = system_retriever(system, key, sysdir, cfg.source, ds.queries)
            try:
                index_with(executor, retriever, ds.corpus, sysdir, {})
                run, _ = search_journaled(retriever, ds.queries, cell, executor=executor)
            finally:
                retriever.close()
            write_run_files(run, sysdir.run, tag=key)
            failed = sum(1 for st in run.status.values() if st.value not in ANSWERED)
            note(
                f"{key}: searched {len(ds.queries)} queries"
                + (f", {failed} failed (they pool nothing)" if failed else "")
            )
    finally:
        executor.close()
    return out


def with_runs(
    systems: Sequence[str | Path], dataset: str | Path, study_dir: str | Path, k: int, note: Callable[[str], None]
) -> list[Path]:
    """`--systems` entries with each experiment config replaced by the results folder of its systems' runs."""
    return [run_config(s, dataset, study_dir, k, note) if is_config(s) else Path(s) for s in systems]
