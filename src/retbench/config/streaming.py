"""The streaming case of a stress config (`stress.streaming`): search while the data changes.

Declared here so the schema, the docs and the error messages come from one place; the case itself runs in
`retbench.studies.stress.streaming`. Every random choice (the document order, which documents are updated
or deleted, the filter fields, the query schedule, the freshness sample) is drawn from `seed`, so a re-run
with the same seed makes the same stream and the same exact answers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from retbench.config.base import Block, NonNegativeInt, PositiveInt


def _selectivities(values: list[float]) -> list[float]:
    if len(set(values)) != len(values):
        raise ValueError("selectivities repeat a value")
    return sorted(values, reverse=True)


class StreamSettings(Block):
    """Ingest a seeded stream of inserts, updates and deletes while queries run at a set rate."""

    seed: int = 0
    initial_fraction: float = Field(
        0.5, ge=0.0, lt=1.0, description="share of the corpus indexed before the stream starts"
    )
    order: Literal["random", "corpus"] = Field("random", description="the order documents are streamed in")
    batch_size: PositiveInt = Field(100, description="documents inserted per write batch")
    docs_per_s: float | None = Field(
        200.0, gt=0.0, description="target insert rate (null: as fast as the store acknowledges)"
    )
    update_fraction: float = Field(
        0.05, ge=0.0, le=0.5, description="share of the initial documents re-written during the stream"
    )
    delete_fraction: float = Field(
        0.05, ge=0.0, le=0.5, description="share of the initial documents deleted during the stream"
    )
    query_qps: float = Field(20.0, gt=0.0, description="rate of the live queries sent while the stream runs")
    checkpoints: PositiveInt = Field(4, description="quiesced measurements, evenly spaced over the stream")
    selectivities: Annotated[list[float], AfterValidator(_selectivities)] = Field(
        default_factory=lambda: [0.5, 0.1, 0.01, 0.001],
        description="share of the corpus each filter selects (besides the unfiltered queries)",
    )
    freshness_docs: NonNegativeInt = Field(
        100, description="inserted, updated and deleted documents each, whose visibility is timed"
    )
    freshness_timeout_s: float = Field(
        30.0, gt=0.0, description="after this, a document is counted never seen (or never removed)"
    )
    probe_interval_s: float = Field(0.05, gt=0.0, description="pause between freshness probe rounds")

    @model_validator(mode="after")
    def _fractions(self) -> StreamSettings:
        if self.update_fraction + self.delete_fraction > 1.0:
            raise ValueError("update_fraction + delete_fraction exceed 1")
        if any(not 0.0 < s <= 1.0 for s in self.selectivities):
            raise ValueError("each selectivity must be in (0, 1]")
        return self
