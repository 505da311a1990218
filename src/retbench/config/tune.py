"""The tuning config (`retbench tune`): one system of an experiment, a grid over its settings, a metric."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, field_validator

from retbench.config.base import ConfigPath
from retbench.config.experiment import ExperimentModel, ExperimentSystem
from retbench.config.lines import field_lines, locate
from retbench.config.loader import read_config
from retbench.config.study import Study, load_study, parse_study
from retbench.errors import ConfigError, InputError
from retbench.metrics.registry import parse_metric


class TuneModel(Study):
    """Search every setting of `grid` once and choose among them by k-fold cross-validation over queries.

    The experiment it names is read and validated by the loader (`load_tune`) into `experiment_model`, the
    experiment's own typed model: tuning derives a new experiment from it, one system per setting, which the
    experiment's loader then checks like any config (adapters against their factories).
    """

    _experiment: ExperimentModel | None = PrivateAttr(None)
    _experiment_lines: dict[str, int] = PrivateAttr(default_factory=dict)
    _max_queries: int | None = PrivateAttr(None)

    name: str | None = Field(None, min_length=1, description="the study's name (default: the experiment's + '-tune')")
    output: str | None = Field(None, description="the results directory (default: results/<name>)")
    experiment: ConfigPath = Field(description="the experiment YAML that holds the system and its data")
    system: str = Field(min_length=1, description="the system of the experiment to tune (its settings are the default)")
    metric: str = Field(description="the metric to optimise (any name the metric registry accepts)")
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] | list[dict[str, Any]] = Field(
        description="dotted keys into the system (params.k1, params.weights, rerank.depth) -> values tried "
        "(every combination); or a list of settings, each a mapping of dotted keys to values"
    )
    folds: Annotated[int, Field(ge=2)] = 5
    seed: int = 0
    group_by: Literal["tags"] | None = Field(None, description="keep queries with the same tags in one fold")
    n_resamples: Annotated[int, Field(ge=100)] = Field(1000, description="bootstrap resamples of the whole procedure")
    max_cost_per_1k_queries: Annotated[float, Field(ge=0.0)] | None = Field(
        None,
        description="choose only among settings whose cost per 1,000 queries (from the experiment's `costs:` "
        "prices) is known and at most this; a setting with an unpriced measured item is left out, never free",
    )

    @field_validator("metric")
    @classmethod
    def _metric_known(cls, value: str) -> str:
        try:
            parse_metric(value)
        except InputError as exc:
            raise ValueError(exc.reason) from None
        return value

    @field_validator("grid")
    @classmethod
    def _grid_not_empty(cls, value: object) -> object:
        if not value:
            raise ValueError("needs at least one setting")
        return value

    @property
    def experiment_model(self) -> ExperimentModel:
        """The experiment the tune names, validated when this config was loaded."""
        if self._experiment is None:
            raise ConfigError(
                "the tuning config was not loaded with its experiment (use load_tune)", field="experiment"
            )
        return self._experiment

    @property
    def max_queries(self) -> int | None:
        """The command line's `--max-queries` (a quick slice of the dataset's queries), None when not given."""
        return self._max_queries

    @property
    def tuned(self) -> ExperimentSystem:
        """The experiment's system this tune searches the settings of."""
        return next(s for s in self.experiment_model.systems if s.label == self.system)

    @property
    def run_name(self) -> str:
        """The tune's name in its reports and its derived experiment: `name:`, else the experiment's + '-tune'."""
        return self.name or f"{self.experiment_model.name or 'experiment'}-tune"

    def in_experiment(self, exc: ConfigError) -> ConfigError:
        """An error about the experiment file (a field of its own, e.g. `systems[2].params.k1`) at that file's line."""
        return locate(exc, str(self.experiment), self._experiment_lines)


def _read_experiment(model: TuneModel) -> None:
    """Read and validate the experiment the tune names (its errors name the experiment file's line); it must hold
    the system and exactly one dataset."""
    path = Path(model.experiment)
    data, text = read_config(path, "experiment config")
    lines = field_lines(text)
    try:
        experiment = parse_study(data, str(path), ExperimentModel)
    except ConfigError as exc:
        raise locate(exc, str(path), lines) from None
    names = [s.label for s in experiment.systems]
    if model.system not in names:
        raise ConfigError(f"no system {model.system!r} in {path} (have: {', '.join(names)})", field="system")
    if model.max_cost_per_1k_queries is not None and experiment.costs is None:
        raise ConfigError(f"a cost limit needs prices: {path} has no `costs:` block", field="max_cost_per_1k_queries")
    if len(experiment.datasets) != 1:
        raise ConfigError("tune one dataset at a time: the experiment must name exactly one", field="experiment")
    model._experiment = experiment
    model._experiment_lines = lines


def load_tune(
    path: str | Path,
    output: str | Path | None = None,
    check: Callable[[TuneModel], None] | None = None,
    max_queries: int | None = None,
) -> TuneModel:
    """A tuning config and the experiment it names, then `check` (the study's checks of every setting, which
    live above this package); every error names file:line and field (a `grid` field at the tune file's line).
    `max_queries`: the command line's query limit, which the model carries like the `--output` override."""

    def read_and_check(model: TuneModel) -> None:
        model._max_queries = max_queries
        _read_experiment(model)
        if check is not None:
            check(model)

    return load_study(path, TuneModel, output, read_and_check)


__all__ = ["TuneModel", "load_tune"]
