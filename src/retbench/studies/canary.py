"""Migration canary: the current system and a candidate (another encoder, chunker, index setting or store) over
the same corpus and a query log, compared before anyone labels; the queries whose top k changed pooled for judging.

The config is an experiment config with exactly two systems, the current one first and the candidate second, and
one dataset: a BEIR folder whose qrels are optional (a `retbench traces import` folder is one). Both systems are
searched over every query of it as `retbench label init --systems` searches them (`studies.labels.systems`: the
embedding cache, saved indexes, the per-query journal), then compared with `retbench diff` (`movement.diff`).

With `study`, the changed queries' pairs (their pooled top k) become a label study folder (`init_study(...,
queries=changed)`), the current system as A and the candidate as B. Labels are then spent only where the systems
disagree: a query whose top k is unchanged (same documents, same order) has the same score under any rank metric
cut at or above k, so its difference is exactly 0. The difference over the whole log is therefore
Δ_log = (n_changed / n_log) · Δ_changed, and its interval the changed queries' interval scaled by the same factor
(`log_difference`): exact for the logged queries, since which queries changed is known without labels.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retbench.config import ExperimentModel
from retbench.config.study import load_study
from retbench.errors import ConfigError
from retbench.io.files import write_json, write_text
from retbench.io.trec import read_run
from retbench.movement import RunDiff, diff
from retbench.report.diff import diff_html, diff_markdown
from retbench.studies.labels.study import Study, init_study
from retbench.studies.labels.systems import run_config

Note = Callable[[str], None]


@dataclass
class Canary:
    """What the canary found: the diff, where it wrote its files, and the label study of the changed pairs."""

    diff: RunDiff
    out: Path
    current: str
    candidate: str
    study: Study | None = None


def _two_systems_one_dataset(cfg: ExperimentModel) -> None:
    """A canary compares two systems (the current one first, the candidate second) over one dataset."""
    if len(cfg.systems) != 2:
        raise ConfigError(
            "a canary compares two systems: the current one first, the candidate second",
            path=cfg.source,
            field="systems",
        )
    if len(cfg.datasets) != 1:
        raise ConfigError(
            "a canary runs over one dataset, given as a folder or a dataset name (the query log)",
            path=cfg.source,
            field="datasets",
        )


def run_canary(
    config: str | Path,
    out: str | Path,
    *,
    k: int = 10,
    p: float = 0.9,
    study: bool = True,
    n_resamples: int = 10_000,
    seed: int = 0,
    note: Note = print,
) -> Canary:
    """Search both systems over the query log, diff them, write `canary.md`, `canary.html`, `canary.json` and (with
    `study`) the label study of the changed queries under OUT/study."""
    cfg = load_study(config, ExperimentModel, None, _two_systems_one_dataset, what="canary config")
    current, candidate = (s.label for s in cfg.systems)
    dataset = cfg.dataset_specs[0].spec
    base = Path(config).parent
    if not Path(dataset).is_absolute() and (base / dataset).exists():
        dataset = str(base / dataset)
    root = Path(out)
    results = run_config(config, dataset, root, k, note, own_dataset=True)
    files = {f.parent.name: f for f in results.glob("**/run.trec")}
    runs_dir = root / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in (current, candidate):
        paths[name] = runs_dir / f"{name}.trec"
        shutil.copyfile(files[name], paths[name])
    from retbench.io.datasets import load_dataset  # deferred with the dataset step (CLI start-up time)

    ds = load_dataset(dataset)
    d = diff(
        read_run(paths[current], name=current),
        read_run(paths[candidate], name=candidate),
        k=k,
        p=p,
        queries=dict(ds.queries.items()),
        n_resamples=n_resamples,
        seed=seed,
    )
    write_text(root / "canary.md", diff_markdown(d))
    write_text(root / "canary.html", diff_html(d))
    write_json(root / "canary.json", d.to_dict())
    canary = Canary(d, root, current, candidate)
    changed = d.changed_queries(as_order=True)
    if study and changed:
        canary.study = init_study(
            root / "study",
            dataset,
            [paths[current], paths[candidate]],
            k=k,
            decision=(current, candidate),
            note=note,
            queries=changed,
        )
        note(
            f"label study: {len(canary.study.pairs)} pairs of the {len(changed)} queries whose top {k} changed "
            f"(of {len(d.query_ids)}) in {root / 'study'}"
        )
    return canary


def log_difference(difference: Mapping[str, Any], n_changed: int, n_log: int) -> dict[str, Any]:
    """The study's difference over the changed queries (`estimate_study(...)["difference"]`) carried to the whole
    log: unchanged queries differ by exactly 0, so mean and interval scale by n_changed / n_log (the logged
    queries' interval where the study gives one)."""
    if n_log < 1 or not 0 <= n_changed <= n_log:
        raise ValueError(f"need 0 <= n_changed <= n_log and n_log >= 1 (got {n_changed}, {n_log})")
    share = n_changed / n_log
    logged = difference.get("logged") or {"low": difference.get("low"), "high": difference.get("high")}

    def scaled(v: object) -> float | None:
        return None if v is None else float(v) * share  # type: ignore[arg-type]

    return {
        "mean": scaled(difference["mean"]),
        "low": scaled(logged["low"]),
        "high": scaled(logged["high"]),
        "share_changed": share,
        "n_changed": n_changed,
        "n_log": n_log,
        "estimate": difference.get("estimate"),
    }
