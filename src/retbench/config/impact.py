"""The ingestion-impact config model (`retbench ingest-impact`): is a document worth ingesting?

See configs/ingest.yaml for every key with its default.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, model_validator

from retbench.config.base import Block, ConfigPath, PositiveInt, config_folder, field_error, resolve_path
from retbench.config.common import Dataset, DatasetBlock, DatasetSpec, EncoderSettings, SystemBlock
from retbench.config.experiment import MetricName
from retbench.config.judge import JudgeSettings
from retbench.config.study import Study

DEFAULT_METRICS = ["recall@10", "ndcg@10", "mrr@10"]
DEFAULT_RETRIEVER = {"adapter": "dense", "params": {"index": "flat_ip", "normalize": True, "max_seq_length": 256}}


class _Source(Block):
    group: str | None = Field(None, description="a name to select these candidates by (leave_one_out.group)")
    seed: int | None = None


class FileSource(_Source):
    """Candidates from a BEIR corpus.jsonl of new documents."""

    kind: Literal["file"]
    path: ConfigPath = Field(description="a BEIR corpus.jsonl (relative to the config's folder)")


class HoldoutSource(_Source):
    """Random documents taken out of the corpus and offered back."""

    kind: Literal["holdout"]
    n: PositiveInt


class GoldSource(_Source):
    """The relevant documents of N queries, taken out and offered back."""

    kind: Literal["gold"]
    queries: PositiveInt


class PresentSource(_Source):
    """Documents already in the corpus (adding them again changes nothing)."""

    kind: Literal["present"]
    n: PositiveInt


class NearDuplicateSource(_Source):
    """Light seeded edits of documents in the corpus, under new ids."""

    kind: Literal["near_duplicate"]
    n: PositiveInt
    edits: PositiveInt = 3


CandidateSource = Annotated[
    FileSource | HoldoutSource | GoldSource | PresentSource | NearDuplicateSource, Field(discriminator="kind")
]


def _group_shorthand(raw: object) -> object:
    return {"group": raw} if isinstance(raw, str) else raw


class LeaveOneOut(Block):
    """Which documents' contribution M(K) - M(K - d) is measured: ids, a sample, or a candidate group."""

    ids: list[str] | None = None
    sample: PositiveInt | None = None
    seed: int | None = None
    group: str | None = None


class Sequential(Block):
    order: Literal["given", "gain"] = Field("given", description="gain: alone gain, best first")


class Novelty(Block):
    chunker: dict[str, Any] | None = Field(None, description="null: one chunk per document; or {kind: ..., ...}")


def _references(value: str, info: ValidationInfo) -> str:
    """`gold_documents`, else a file read from the config's folder (like every path in a config)."""
    if value == "gold_documents":
        return value
    return str(resolve_path(value, config_folder(info))[0])


class ContextRecall(Block):
    """How much of each query's reference answer the top documents support."""

    references: Annotated[str, AfterValidator(_references)] = Field(
        min_length=1, description="gold_documents, or a JSONL of {query_id, answer} lines"
    )
    threshold: float = Field(0.8, ge=-1.0, le=1.0, description="cosine a sentence needs to support another")
    context_k: PositiveInt = 5
    judge: JudgeSettings | None = Field(None, description="an LLM decides support instead of the cosine")
    max_chars: PositiveInt | None = None


class Gain(Block):
    """Gain = alpha * d<recall> + beta * dContextRecall + gamma * Novelty(min or mean)."""

    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 0.01
    recall: MetricName | None = Field(None, description="default: the first recall@k among the metrics")
    novelty: Literal["min", "mean"] = "min"


Mode = Literal["alone", "sequential", "leave_one_out"]


def _alone() -> list[Mode]:
    return ["alone"]


class IngestModel(Study):
    """An ingestion-impact experiment."""

    name: str | None = None
    description: str | None = None
    output: str | None = None
    dataset: Dataset = Field(default_factory=lambda: DatasetBlock(name="scifact"))
    retriever: SystemBlock = Field(default_factory=lambda: SystemBlock.model_validate(DEFAULT_RETRIEVER))
    metrics: list[MetricName] = Field(default_factory=lambda: list(DEFAULT_METRICS), min_length=1)
    relevance_level: PositiveInt = 1
    candidates: list[CandidateSource] = Field(min_length=1)
    modes: list[Mode] = Field(default_factory=_alone, min_length=1)
    leave_one_out: Annotated[
        LeaveOneOut | None, BeforeValidator(_group_shorthand, json_schema_input_type=str | LeaveOneOut | None)
    ] = None
    sequential: Sequential = Field(default_factory=Sequential)
    novelty: Novelty = Field(default_factory=Novelty)
    context_recall: ContextRecall | None = None
    gain: Gain = Field(default_factory=Gain)
    dedupe: Literal["id", "text"] = "text"
    affected_by: MetricName | None = None
    engine: Literal["auto", "incremental", "rebuild", "reindex"] = "auto"
    encoder: EncoderSettings = Field(default_factory=EncoderSettings)
    seed: int = 0

    @property
    def dataset_spec(self) -> DatasetSpec:
        """The dataset block as every study loads it (the study's seed samples its queries)."""
        return self.dataset.to_spec(self.seed)

    @model_validator(mode="after")
    def _modes_have_their_blocks(self) -> IngestModel:
        if "leave_one_out" in self.modes and not (
            self.leave_one_out and self.leave_one_out.model_dump(exclude_none=True)
        ):
            raise field_error("leave_one_out", "mode leave_one_out needs a leave_one_out block")
        return self
