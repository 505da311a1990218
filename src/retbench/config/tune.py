"""The tuning config (`retbench tune`): one system of an experiment, a grid over its settings, a metric."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from retbench.config.base import Block, ConfigPath
from retbench.errors import InputError
from retbench.metrics.registry import parse_metric


class TuneModel(Block):
    """Search every setting of `grid` once and choose among them by k-fold cross-validation over queries."""

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
    def _grid_not_empty(cls, value: Any) -> Any:
        if not value:
            raise ValueError("needs at least one setting")
        return value


__all__ = ["TuneModel"]
