"""`retbench tune`: every setting of a grid searched once, one chosen by cross-validation over queries.

A tuning config names an experiment, one of its systems and a grid over that system's settings (dotted keys
into the system block: `params.k1`, `params.weights`, `params.components.1.depth`, `rerank.depth`). Each
distinct setting becomes a system of a derived experiment (the system as written is setting 0, the untuned
default) run by the ordinary runner into `<output>/runs`, so the journal and the embedding cache make a
repeated setting cost nothing and a killed tune resumes. The per-query values of the chosen metric then go
to `tuning.cross_validate` (the selection protocol and its CI are described there). The study writes
`tune.json` (everything below), and `chosen.yaml`, the chosen system as a ready block for an experiment.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from retbench.config.costs import CostsBlock
from retbench.config.experiment import ExperimentSystem
from retbench.config.tune import TuneModel, load_tune
from retbench.errors import ConfigError, InputError
from retbench.inputs import load_systems
from retbench.io.files import write_json, write_text
from retbench.jsontypes import JSONObject, JSONValue
from retbench.metrics.registry import lower_is_better, parse_metric
from retbench.report.tune import setting_name, tune_html, tune_lines, tune_markdown
from retbench.resolution import RankResolution, resolve
from retbench.results.costs import system_costs
from retbench.results.model import StudyResult
from retbench.results.read import read_results
from retbench.studies.benchmark import parse_config, run_experiment
from retbench.studies.cell_contract import Progress
from retbench.studies.outcome import raise_if_failed
from retbench.tuning import Candidate, TuneResult, candidates, cross_validate


@dataclass(frozen=True)
class Setting:
    """One point of the grid: its changes to the system block and the system block they give."""

    index: int
    changes: JSONObject
    system: JSONObject

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={json.dumps(v)}" for k, v in self.changes.items()) or "default (as written)"


@dataclass(frozen=True)
class TuneOutcome:
    """What a tune found; `result` indexes into `settings`."""

    config: TuneModel
    settings: list[Setting]
    query_ids: list[str]
    result: TuneResult
    duplicates: list[str]
    resolution: RankResolution | None = None  # the settings' in-sample rank intervals (three settings or more)
    candidates: list[Candidate] = field(default_factory=list)  # each setting's mean, folds' votes, latency
    #: with max_cost_per_1k_queries: the limit, the currency and every grid setting's cost (`within_cost`)
    cost_limit: dict[str, Any] | None = None


def expand_grid(grid: Mapping[str, Sequence[JSONValue]] | Sequence[Mapping[str, JSONValue]]) -> list[JSONObject]:
    """The grid's settings: every combination of a mapping's values (keys in order), or a list as written."""
    return [changes for changes, _, _ in grid_points(grid)]


def grid_points(
    grid: Mapping[str, Sequence[JSONValue]] | Sequence[Mapping[str, JSONValue]],
) -> list[tuple[JSONObject, dict[str, str], str]]:
    """Each setting of the grid (as `expand_grid`) with the tune file's field of each of its values
    (`grid.params.k1[2]`, `grid[3].params.weights`) and of the setting as a whole (`grid`, `grid[3]`)."""
    if isinstance(grid, Mapping):
        keys = list(grid)
        return [
            (
                {k: grid[k][j] for k, j in zip(keys, combo, strict=True)},
                {k: f"grid.{k}[{j}]" for k, j in zip(keys, combo, strict=True)},
                "grid",
            )
            for combo in itertools.product(*(range(len(grid[k])) for k in keys))
        ]
    return [(dict(s), {k: f"grid[{i}].{k}" for k in s}, f"grid[{i}]") for i, s in enumerate(grid)]


def apply_changes(system: Mapping[str, JSONValue], changes: Mapping[str, JSONValue], where: str = "grid") -> JSONObject:
    """A copy of the system block with each dotted key set (numeric parts index lists; missing mappings are made)."""
    out = copy.deepcopy(dict(system))
    for key, value in changes.items():
        parts = key.split(".")
        if parts[0] == "name":
            raise ConfigError("a setting cannot change the system's name", field=f"{where}.{key}")
        node: object = out
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ConfigError(f"{part!r} is not an index of a list of {len(node)}", field=f"{where}.{key}")
                if last:
                    node[int(part)] = copy.deepcopy(value)
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = copy.deepcopy(value)
                else:
                    node = node.setdefault(part, {})
            else:
                raise ConfigError(f"{'.'.join(parts[:i])} is not a mapping or a list", field=f"{where}.{key}")
    return out


def load_config(path: str | Path, output: str | Path | None = None, max_queries: int | None = None) -> TuneModel:
    """A tuning config from YAML, with every setting of its grid checked as the experiment's loader would check
    it, before any is searched; every error names file:line and field (the tune file's grid entry that set a
    bad value, or the experiment file's line for the system as written)."""
    if max_queries is not None and max_queries < 1:
        raise InputError(f"--max-queries must be positive, got {max_queries}", field="max-queries")

    def check(model: TuneModel) -> None:
        _check_query_count(model)
        check_settings(model)

    return load_tune(path, output, check, max_queries)


def _check_query_count(cfg: TuneModel) -> None:
    """Refuse, before searching, a query limit that cannot fill every fold (the folds are cut from the queries)."""
    folds = cfg.folds
    if cfg.max_queries is not None and cfg.max_queries < folds:
        raise InputError(
            f"--max-queries {cfg.max_queries} cannot make {folds} folds: give at least {folds} queries, "
            f"or fewer folds (`folds:` in {cfg.source})",
            field="max-queries",
        )
    limit = cfg.experiment_model.datasets[0].max_queries
    if limit is not None and 0 < limit < folds:
        raise ConfigError(
            f"{folds} folds need at least {folds} queries, but the experiment's datasets[0].max_queries is {limit}",
            field="folds",
        )


def _dotted(key: str) -> str:
    """A grid key in the error fields' spelling: list indices in brackets (`params.components.1.depth` ->
    `params.components[1].depth`)."""
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", key)


def _block(system: ExperimentSystem) -> JSONObject:
    """A system of the experiment as its block (the keys its author set, paths resolved), which the grid's dotted
    keys change and the experiment's loader reads back."""
    block: JSONObject = system.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return block


def check_settings(cfg: TuneModel) -> None:
    """Validate the system as written and every grid setting as its own experiment (`benchmark.parse_config`:
    the models, the adapter's parameter values, rerankers), so a bad value fails before the first setting runs.

    A setting's error names the tune file's field that set the value (`grid[3].params.weights`), or the
    setting as a whole when the bad value came from the system as written combined with the setting's change
    (weights the base gives, a fusion the setting picks); the system as written is blamed in the experiment file.
    """
    exp_source = str(cfg.experiment)
    systems = cfg.experiment_model.systems
    base_at = next(i for i, s in enumerate(systems) if s.label == cfg.system)
    base = _block(systems[base_at])
    try:
        parse_config(_derived_experiment(cfg, [Setting(0, {}, copy.deepcopy(base))]), exp_source)
    except ConfigError as exc:
        fld = exc.field or ""
        if fld.startswith("systems[0]"):
            fld = f"systems[{base_at}]" + fld[len("systems[0]") :]
        raise cfg.in_experiment(ConfigError(exc.reason, field=fld)) from None
    for i, (changes, fields, whole) in enumerate(grid_points(cfg.grid)):
        try:
            system = apply_changes(base, changes, whole)
            parse_config(_derived_experiment(cfg, [Setting(i + 1, changes, system)]), exp_source)
        except ConfigError as exc:
            fld = exc.field or ""
            if fld.startswith("grid"):  # apply_changes names the tune file's field itself
                raise
            sub = fld[len("systems[0]") :].lstrip(".") if fld.startswith("systems[0]") else fld
            key = next((k for k in changes if re.match(re.escape(_dotted(k)) + r"($|[.\[])", sub)), None)
            if key is not None:
                target, tail = fields[key], sub[len(_dotted(key)) :].lstrip(".")
            else:
                target, tail = whole, sub
            reason = f"{tail}: {exc.reason}" if tail else exc.reason
            raise ConfigError(f"{reason} (setting {Setting(i + 1, changes, {}).label})", field=target) from None


def settings_of(cfg: TuneModel) -> tuple[list[Setting], list[str]]:
    """Setting 0 (the system as written) and each distinct grid setting; labels of the duplicates skipped."""
    base = _block(cfg.tuned)
    out = [Setting(0, {}, copy.deepcopy(base))]
    skipped = []
    for i, changes in enumerate(expand_grid(cfg.grid)):
        system = apply_changes(base, changes, f"grid[{i}]" if isinstance(cfg.grid, list) else "grid")
        if any(s.system == system for s in out):
            skipped.append(Setting(-1, changes, system).label)
            continue
        out.append(Setting(len(out), changes, system))
    return out, skipped


def _derived_experiment(cfg: TuneModel, settings: list[Setting]) -> dict[str, Any]:
    """The experiment the settings run as: the named one with one system per setting, the tuned metric only."""
    exp: dict[str, Any] = cfg.experiment_model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    exp["name"] = cfg.run_name
    exp["metrics"] = [cfg.metric]
    exp["systems"] = [{**s.system, "name": f"{cfg.system}-{s.index:02d}"} for s in settings]
    if isinstance(exp.get("costs"), dict):  # the tuned system's own prices apply to each of its settings
        own = (exp["costs"].get("systems") or {}).get(cfg.system)
        exp["costs"]["systems"] = {f"{cfg.system}-{s.index:02d}": own for s in settings} if own else {}
    exp.pop("output", None)
    exp.pop("baseline", None)
    if cfg.max_queries is not None:
        ds = exp["datasets"][0]
        ds["max_queries"] = min(int(ds.get("max_queries") or cfg.max_queries), cfg.max_queries)
    return exp


def within_cost(
    cfg: TuneModel, prices: CostsBlock, settings: list[Setting], keys: list[str], runs: StudyResult
) -> tuple[list[int], dict[str, Any]]:
    """The positions of the settings whose cost per 1,000 queries is known and at most the limit, and the record of
    every setting's cost. A setting with a measured but unpriced item has no known cost and is left out (never
    read as free); none within the limit is an error that lists the costs."""
    limit = cfg.max_cost_per_1k_queries
    rows, kept = [], []
    for i, (s, key) in enumerate(zip(settings, keys, strict=True)):
        res = runs[key]
        n = len(runs.run(key).query_ids)
        total = system_costs(prices, key, res.resources, res.usage, n)["per_1k_queries"]["total"]
        ok = total is not None and limit is not None and total <= limit
        kept += [i] if ok else []
        rows.append({"label": s.label, "run": key, "cost_per_1k_queries": total, "within": ok})
    record = {"max_cost_per_1k_queries": limit, "currency": prices.currency, "settings": rows}
    if not kept:
        said = "; ".join(
            f"{r['label']}: "
            + (f"{r['cost_per_1k_queries']:.3g}" if r["cost_per_1k_queries"] is not None else "missing")
            for r in rows
        )
        raise InputError(
            f"no setting costs at most {limit:g} {prices.currency} per 1,000 queries ({said})",
            field="max_cost_per_1k_queries",
        )
    return kept, record


def _groups(query_ids: Sequence[str], tags: Mapping[str, Sequence[str]]) -> list[str]:
    """Each query's group for `group_by: tags`: its tags joined (a query with none is its own group)."""
    of: dict[str, list[str]] = {}
    for tag, qids in tags.items():
        for q in qids:
            of.setdefault(q, []).append(tag)
    return ["|".join(sorted(of[q])) if q in of else f"query:{q}" for q in query_ids]


def run_tune(
    cfg: TuneModel, *, log: Callable[[str], None] = print, force: bool = False, progress: Progress | None = None
) -> TuneOutcome:
    """Search every setting (resumable), cross-validate the choice, write tune.json and chosen.yaml.

    `progress(stage, done, total)` is called as `retbench run` calls it (each setting's index and search), so
    the CLI shows the same bars while the settings are encoded, indexed and searched."""
    settings, duplicates = settings_of(cfg)
    out = cfg.output_dir
    runs = out / "runs"
    derived = _derived_experiment(cfg, settings)
    experiment = parse_config(derived, str(cfg.experiment), runs)
    write_text(out / "experiment.yaml", yaml.safe_dump(derived, sort_keys=False))
    log(f"tuning {cfg.system}: {len(settings)} settings ({len(duplicates)} duplicates skipped) on {cfg.metric}")
    outcome = run_experiment(experiment, force=force, log=log, history=False, progress=progress)
    raise_if_failed(outcome)  # a failed backend, or an LLM stage whose every call failed
    loaded = load_systems([runs], metrics=[cfg.metric])
    keys = [f"{cfg.system}-{s.index:02d}" for s in settings]
    cost_limit = None
    if cfg.max_cost_per_1k_queries is not None:  # choose among the settings shown to be within the limit
        assert experiment.costs is not None  # the tune's loader refuses a cost limit without prices
        kept, cost_limit = within_cost(cfg, experiment.costs, settings, keys, read_results(runs))
        keys = [keys[i] for i in kept]
        settings = [Setting(pos, settings[i].changes, settings[i].system) for pos, i in enumerate(kept)]
        log(f"cost limit: {len(kept)} of {len(cost_limit['settings'])} settings within it")
    evs = [loaded.get(k) for k in keys]
    query_ids = [q for q in evs[0].query_ids if all(q in ev.query_ids for ev in evs[1:])]
    scores = np.stack([ev.column(cfg.metric)[[ev.query_ids.index(q) for q in query_ids]] for ev in evs])
    groups = _groups(query_ids, loaded.groups) if cfg.group_by == "tags" else None
    result = cross_validate(
        scores,
        folds=cfg.folds,
        seed=cfg.seed,
        groups=groups,
        default=0,
        n_resamples=cfg.n_resamples,
        higher_is_better=not lower_is_better(cfg.metric),  # a rate of errors is tuned down
    )
    for s, ev in zip(settings, evs, strict=True):
        ev.system = setting_name(s.index)
    res = resolve(evs, parse_metric(cfg.metric).name)
    cands = candidates(result, keys, [s.label for s in settings], read_results(runs))
    done = TuneOutcome(cfg, settings, query_ids, result, duplicates, res, cands, cost_limit)
    write_json(out / "tune.json", tune_record(done))
    write_tune_reports(done)
    chosen = {**settings[result.chosen].system, "name": cfg.system}
    header = f"# chosen by {cfg.folds}-fold cross-validation on {cfg.metric} (retbench tune; tune.json)\n"
    write_text(out / "chosen.yaml", header + yaml.safe_dump([chosen], sort_keys=False))
    return done


def write_tune_reports(t: TuneOutcome) -> None:
    """report.md and report.html beside tune.json: the selection as the CLI prints it, the candidate table with
    rank intervals, and (HTML) each setting's quality against its latency with the Pareto front."""
    m = t.config
    lines = tune_lines(t.result, [s.label for s in t.settings], m.metric, len(t.query_ids))
    title = f"Tuning {m.system} on {m.metric}: {m.run_name}"
    write_text(m.output_dir / "report.md", tune_markdown(title, lines, t.candidates, t.resolution))
    write_text(m.output_dir / "report.html", tune_html(title, lines, t.candidates, t.resolution, m.metric))


def tune_record(t: TuneOutcome) -> dict[str, object]:
    """tune.json: the grid, each setting's in-sample mean, the folds' choices and the out-of-sample estimate."""
    r, m = t.result, t.config
    return {
        "name": m.run_name,
        "experiment": str(m.experiment),
        "system": m.system,
        "metric": parse_metric(m.metric).name,
        "higher_is_better": r.higher_is_better,
        "folds": m.folds,
        "seed": m.seed,
        "group_by": m.group_by,
        "n_queries": len(t.query_ids),
        "settings": [
            {
                "index": s.index,
                "changes": s.changes,
                "label": s.label,
                "in_sample_mean": r.setting_means[s.index],
                **_rank_of(t.resolution, setting_name(s.index)),
            }
            for s in t.settings
        ],
        "duplicates_skipped": t.duplicates,
        "cost_limit": t.cost_limit,
        "per_fold": [
            {
                "fold": f.index,
                "queries": f.n_queries,
                "chosen": f.chosen,
                "train_mean": f.train_mean,
                "test_mean": f.test_mean,
            }
            for f in r.folds
        ],
        "out_of_sample": {
            "mean": r.out_of_sample,
            "ci": list(r.out_of_sample_ci),
            "ci_method": "bootstrap of the whole procedure",
        },
        "in_sample_best": {"index": r.in_sample_best, "mean": r.in_sample_mean},
        "optimism": r.optimism,
        "chosen": {"index": r.chosen, "chosen_by_folds": r.chosen_by_folds},
        "vs_default": {
            "default_mean": r.default_mean,
            "delta": r.delta_vs_default,
            "ci": list(r.delta_ci) if r.delta_ci else None,
            "p": r.p_vs_default,
            "p_method": "two-sided, from the bootstrap of the whole procedure",
            "within_noise": r.within_noise,
        },
    }


def _rank_of(res: RankResolution | None, name: str) -> dict[str, Any]:
    """A setting's in-sample rank, its 95% rank interval and whether it is tied for first (none: < 3 settings)."""
    if res is None:
        return {}
    i = res.names.index(name)
    return {"rank": res.rank[i], "rank_interval": [res.low[i], res.high[i]], "tied_first": name in res.tied_first}


__all__ = [
    "Setting",
    "TuneOutcome",
    "apply_changes",
    "check_settings",
    "expand_grid",
    "grid_points",
    "load_config",
    "run_tune",
]
