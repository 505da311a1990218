"""The ship-criteria file model (`retbench gate --criteria`): floors and drop limits with severities.

Whether a threshold lies inside its metric's range is checked where the criteria are built
(`retbench.criteria`), with the same file:line errors.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from retbench.config.base import Block, NonNegativeFloat, NonNegativeInt, field_error
from retbench.errors import InputError
from retbench.metrics.overlap import MEASURES
from retbench.metrics.registry import parse_metric


class Limits(Block):
    """A floor and a drop limit (at least one of them)."""

    threshold: NonNegativeFloat | None = Field(None, description="absolute floor for the candidate's mean")
    regression_max: NonNegativeFloat | None = Field(None, description="largest allowed drop below the baseline")

    @model_validator(mode="after")
    def _one_limit(self) -> Limits:
        if self.threshold is None and self.regression_max is None:
            raise ValueError("needs a threshold or a regression_max")
        return self


class GateBlock(Limits):
    """One gate: a metric (or a name read as one), its limits, and whether it blocks a merge."""

    name: str = Field(min_length=1, description="the gate's name; without `metric`, read as the metric")
    metric: str | None = Field(None, description="any name the metric registry accepts")
    severity: Literal["error", "warning"] = Field("error", description="error blocks the merge; warning reports")
    require_significance: bool | None = Field(None, description="a drop blocks only when p < alpha")
    sequential: bool | None = Field(None, description="judge and report with an anytime-valid sequence")
    tags: dict[str, Limits] = Field(default_factory=dict, description="per-tag floors and drop limits")
    description: str | None = None

    @model_validator(mode="after")
    def _metric_known(self) -> GateBlock:
        key = "metric" if self.metric is not None else "name"
        try:
            parse_metric(self.metric if self.metric is not None else self.name)
        except InputError as exc:
            raise field_error(key, exc.reason) from None
        return self


def _unique_gates(gates: list[GateBlock]) -> list[GateBlock]:
    seen: set[str] = set()
    for i, g in enumerate(gates):
        if g.name in seen:
            raise field_error(f"[{i}].name", f"gate name {g.name!r} is used twice")
        seen.add(g.name)
    return gates


class MovementBlock(Block):
    """A label-free gate: how far the candidate's top k may move from the baseline's (no qrels needed).

    `max` caps the mean over queries (the share of queries, for `changed_set` / `changed_order`), `min` floors it
    (`rbo_ext`, `jaccard`, ...); the measures are `retbench diff`'s (`metrics.overlap.MEASURES`)."""

    name: str = Field(min_length=1, description="the gate's name")
    measure: Literal[tuple(MEASURES)] = Field(description="a `retbench diff` measure")  # type: ignore[valid-type]
    k: int = Field(10, ge=1, description="the top k compared")
    p: float = Field(0.9, gt=0.0, lt=1.0, description="RBO's persistence")
    max: float | None = Field(None, ge=-1.0, le=1.0, description="largest allowed mean")
    min: float | None = Field(None, ge=-1.0, le=1.0, description="smallest allowed mean")
    severity: Literal["error", "warning"] = Field("error", description="error blocks the merge; warning reports")
    description: str | None = None

    @model_validator(mode="after")
    def _one_limit(self) -> MovementBlock:
        if self.max is None and self.min is None:
            raise ValueError("needs a max or a min")
        return self


class CriteriaModel(Block):
    """A ship-criteria file: the gates and the defaults they share."""

    gates: Annotated[list[GateBlock], AfterValidator(_unique_gates)] = Field(default_factory=list)
    movement: list[MovementBlock] = Field(
        default_factory=list, description="label-free limits on how much the top k moves (no qrels needed)"
    )
    alpha: float = Field(0.05, gt=0.0, lt=1.0, description="significance level for require_significance")
    require_significance: bool = Field(False, description="the default of every gate")
    max_failed_queries: NonNegativeInt = Field(0, description="candidate backend failures tolerated before exit 3")
    sequential: bool = Field(
        False,
        description="the default of every gate: each gate shows anytime-valid confidence sequences (valid when the "
        "gate is re-run after every batch of queries and stops at the first failure), and require_significance "
        "asks the sequence of B − A, not the one-look p-value",
    )
    description: str | None = None

    @model_validator(mode="after")
    def _some_gate(self) -> CriteriaModel:
        if not self.gates and not self.movement:
            raise field_error("gates", "needs at least one gate (or a movement limit)")
        return self
