"""The tuning config (`retbench tune`): one system of an experiment, a grid over its settings, a metric."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, field_validator

from retbench.config.base import ConfigPath
from retbench.config.lines import field_lines, locate
from retbench.config.loader import read_config
from retbench.config.study import Study, load_study
from retbench.errors import ConfigError, InputError
from retbench.metrics.registry import parse_metric


class TuneModel(Study):
    """Search every setting of `grid` once and choose among them by k-fold cross-validation over queries.

    The experiment it names is read by the loader (`load_tune`) into `experiment_data`: tuning derives a new
    experiment from it, which the experiment's own loader then validates like any config file.
    """

    _experiment: dict[str, Any] = PrivateAttr(default_factory=dict)
    _experiment_lines: dict[str, int] = PrivateAttr(default_factory=dict)

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
    def experiment_data(self) -> dict[str, Any]:
        """The experiment file's mapping, as read when this config was loaded."""
        return self._experiment

    def in_experiment(self, exc: ConfigError) -> ConfigError:
        """An error about the experiment file (a field of its own, e.g. `systems[2].params.k1`) at that file's line."""
        return locate(exc, str(self.experiment), self._experiment_lines)


def _read_experiment(model: TuneModel) -> None:
    """Read the experiment the tune names; it must hold the system and exactly one dataset."""
    path = Path(model.experiment)
    data, text = read_config(path, "experiment config")
    if not isinstance(data, dict):
        raise ConfigError("the experiment file must hold a mapping", path=path)
    names = [s.get("name") for s in data.get("systems") or [] if isinstance(s, dict)]
    if model.system not in names:
        raise ConfigError(f"no system {model.system!r} in {path} (have: {', '.join(map(str, names))})", field="system")
    if model.max_cost_per_1k_queries is not None and not isinstance(data.get("costs"), dict):
        raise ConfigError(f"a cost limit needs prices: {path} has no `costs:` block", field="max_cost_per_1k_queries")
    if len(data.get("datasets") or []) != 1:
        raise ConfigError("tune one dataset at a time: the experiment must name exactly one", field="experiment")
    model._experiment = data
    model._experiment_lines = field_lines(text)


def load_tune(
    path: str | Path, output: str | Path | None = None, check: Callable[[TuneModel], None] | None = None
) -> TuneModel:
    """A tuning config and the experiment it names, then `check` (the study's checks of every setting, which
    live above this package); every error names file:line and field (a `grid` field at the tune file's line)."""

    def read_and_check(model: TuneModel) -> None:
        _read_experiment(model)
        if check is not None:
            check(model)

    return load_study(path, TuneModel, output, read_and_check)


__all__ = ["TuneModel", "load_tune"]
