"""The document-values config model (`retbench values`): what every document of a corpus earns for its queries.

See configs/values-scifact.yaml for every key with its default, and docs/howto/document-values.md for the rules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from retbench.config.base import Block, PositiveInt, field_error
from retbench.config.common import Dataset, DatasetBlock, EncoderSettings, SystemBlock
from retbench.config.study import Study

DEFAULT_RETRIEVER = {"adapter": "dense", "params": {"index": "flat_ip", "normalize": True, "max_seq_length": 256}}


class MonteCarlo(Block):
    """The seeded permutation estimate: the method for other retrievers and nDCG, and a check beside exact."""

    permutations: int = Field(200, ge=2, description="permutations drawn (the standard error falls as 1/sqrt)")
    seed: int | None = Field(None, description="default: the config's seed")
    check: bool = Field(False, description="with the exact method: also estimate, and report how far apart they are")


class NearDuplicates(Block):
    """Documents whose embeddings' cosine reaches the threshold are grouped (novelty = 1 - cosine below 1 - it)."""

    threshold: float = Field(0.95, gt=0.0, le=1.0)


class Leaks(Block):
    """Queries found in the corpus: the text itself (case and spacing folded), or a document this close."""

    threshold: float = Field(0.9, gt=0.0, le=1.0, description="query-document cosine counted as a leak")


class ValuesModel(Study):
    """A document-values study."""

    name: str | None = None
    description: str | None = None
    output: str | None = None
    dataset: Dataset = Field(default_factory=lambda: DatasetBlock(name="scifact"))
    retriever: SystemBlock = Field(default_factory=lambda: SystemBlock.model_validate(DEFAULT_RETRIEVER))
    utility: Literal["precision", "recall", "ndcg"] = Field(
        "recall", description="the metric a document's value is a share of: precision@k, recall@k or ndcg@k"
    )
    k: PositiveInt = 10
    relevance_level: PositiveInt = 1
    method: Literal["auto", "exact", "monte_carlo"] = Field(
        "auto", description="auto: exact for a dense flat_ip retriever with precision or recall, else monte_carlo"
    )
    monte_carlo: MonteCarlo = Field(default_factory=MonteCarlo)
    group_by: list[str] = Field(
        default_factory=list, description="metadata fields to sum values by ('folder': the id up to its last '/')"
    )
    near_duplicates: NearDuplicates = Field(default_factory=NearDuplicates)
    leaks: Leaks = Field(default_factory=Leaks)
    top: PositiveInt = Field(20, description="rows of each ranked table in report.md (values.json has all)")
    encoder: EncoderSettings = Field(
        default_factory=EncoderSettings, description="for near-duplicates and leaks when the retriever is not dense"
    )
    seed: int = 0

    @model_validator(mode="after")
    def _exact_needs_a_closed_form(self) -> ValuesModel:
        if self.method == "exact" and self.utility == "ndcg":
            raise field_error("method", "exact values hold for precision and recall only; ndcg needs monte_carlo")
        return self
