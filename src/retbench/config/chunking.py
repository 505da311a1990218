"""The chunking study's config model (`retbench chunking`): chunkers x retrievers on a chunking set or a BEIR corpus.

`dataset` is either a string (a chunking set: long documents with gold excerpts, judged by character
spans) or a mapping, the experiment's dataset block (`{name: scifact, split: test, max_queries: 50,
corpus_sample: 1000}`: a BEIR corpus judged at document level by its qrels). The span-only options
(`token_k`, `budgets`, `relevance`, top-level `max_queries`) are refused on a BEIR dataset with an
error naming the field, never silently ignored: character overlap, token budgets and excerpt
thresholds have no meaning where relevance is a grade per document (the slice goes in the dataset
block, as in `retbench run`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from retbench.chunkers import CHUNKERS, make_chunker
from retbench.config.base import Block, PositiveInt, UnitFloat, error_message, field_error, field_name
from retbench.config.common import DatasetBlock, DatasetSpec, EvalBlock, unique_names
from retbench.config.experiment import MetricName, ScopedSystem, metric_cutoffs
from retbench.config.study import Study
from retbench.errors import ConfigError
from retbench.metrics.primary import default_primary
from retbench.metrics.registry import parse_metric
from retbench.metrics.settings import EvalSettings

DEFAULT_METRICS = ["recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "P@5"]
SEPARATOR = "+"  # between the chunker's and the system's name in a pair's results key


def _chunker_kind(kind: str) -> str:
    if kind not in CHUNKERS:
        raise ValueError(f"unknown chunker kind {kind!r}; expected one of {', '.join(CHUNKERS)}")
    return kind


class ChunkerBlock(Block):
    """A chunker: its kind and that chunker's own parameters (checked when it is built)."""

    model_config = ConfigDict(extra="allow")

    name: str | None = Field(None, description="the chunker's name in results (default: its kind)")
    kind: Annotated[str, AfterValidator(_chunker_kind)] = Field(description=", ".join(CHUNKERS))


def _pair_names(blocks: list[Any]) -> list[Any]:
    """Names are unique and can be joined into one folder name `<chunker>+<system>`."""
    seen: set[str] = set()
    for i, b in enumerate(blocks):
        name = b.name or getattr(b, "kind", None) or b.adapter
        if name in seen:
            raise field_error(f"[{i}].name", f"duplicate name {name!r}")
        if "/" in name or SEPARATOR in name or name in (".", ".."):
            raise field_error(f"[{i}].name", f"a name cannot contain '/' or '{SEPARATOR}'")
        seen.add(name)
    return blocks


class RelevanceBlock(Block):
    """When a retrieved chunk counts as relevant: it overlaps a gold excerpt by enough characters."""

    min_chars: PositiveInt = 1
    min_fraction: UnitFloat = 0.0


#: options that only mean something when relevance is character spans (refused on a BEIR dataset)
SPAN_ONLY = ("token_k", "budgets", "relevance", "max_queries")


class ChunkingModel(Study):
    """A chunking experiment: every chunker x every system, judged by character spans or a BEIR corpus's qrels."""

    name: str | None = None
    description: str | None = None
    output: str | None = None
    dataset: str | DatasetBlock = Field(
        "chunking_eval",
        description="a chunking set name or folder (judged by spans), or a BEIR dataset block "
        "{name|path, split, max_queries, corpus_sample} (judged by its qrels, a chunk's rank given to its document)",
    )
    max_queries: PositiveInt | None = None
    depth: PositiveInt = Field(
        50, description="chunks retrieved per question (on a BEIR dataset: distinct documents, searching deeper)"
    )
    metrics: list[MetricName] = Field(default_factory=lambda: list(DEFAULT_METRICS), min_length=1)
    primary: MetricName | None = Field(
        None,
        description="the metric the (chunker, system) pairs are ranked on (rank intervals, tied for first), one of "
        "`metrics`; default: the first of `metrics` that measures the systems, not a count, the labels' coverage "
        "(judged, holes) or scope_miss_rate (metrics.primary.default_primary)",
    )
    token_k: list[PositiveInt] = Field(default_factory=lambda: [5, 10], min_length=1)
    budgets: list[PositiveInt] = Field(default_factory=lambda: [512], min_length=1)
    tokenizer: str = Field("all-MiniLM-L6-v2", description="counts tokens per chunk and budget")
    max_seq_length: PositiveInt = 256
    relevance: RelevanceBlock = Field(default_factory=RelevanceBlock)
    chunkers: Annotated[list[ChunkerBlock], AfterValidator(_pair_names)] = Field(min_length=1)
    systems: Annotated[list[ScopedSystem], AfterValidator(unique_names), AfterValidator(_pair_names)] = Field(
        min_length=1
    )
    evaluation: EvalBlock = Field(default_factory=EvalBlock)
    batch_size: PositiveInt = 64
    seed: int = 0

    @model_validator(mode="before")
    @classmethod
    def _one_dataset_error(cls, data: object, info: ValidationInfo) -> object:
        """A bad dataset is named once, as `dataset` or `dataset.<key>` (not as each member of the union)."""
        value = data.get("dataset") if isinstance(data, dict) else None
        if value is None:
            return data
        if isinstance(value, dict):
            try:
                DatasetBlock.model_validate(value, context=info.context)
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                loc = tuple(err["loc"])
                if err["type"] == "unknown_key":
                    loc = (*loc, (err.get("ctx") or {}).get("key", ""))
                sub = field_name(loc, value)
                raise field_error(f"dataset.{sub}" if sub else "dataset", error_message(err)) from None
        elif not isinstance(value, str) or not value.strip():
            raise field_error(
                "dataset", f"must be a chunking set's name or folder, or a dataset block mapping; got {value!r}"
            )
        return data

    @model_validator(mode="after")
    def _span_options_need_spans(self) -> ChunkingModel:
        if isinstance(self.dataset, DatasetBlock):
            for name in SPAN_ONLY:
                if name in self.model_fields_set:
                    where = " (set dataset.max_queries instead)" if name == "max_queries" else ""
                    raise field_error(
                        name,
                        f"{name} applies to a chunking set judged by character spans; this dataset is judged by "
                        f"its qrels (document-level), so remove it{where}",
                    )
            for i, system in enumerate(self.systems):
                if system.scope is not None:  # scope_miss_rate reads chunk scopes against span gold only
                    raise field_error(
                        f"systems[{i}].scope",
                        "a scope stage in a chunking study needs a chunking set (gold excerpts); on a BEIR dataset "
                        "scope the system in `retbench run`",
                    )
        return self

    @model_validator(mode="after")
    def _chunkers_build(self) -> ChunkingModel:
        """Each chunker is built once with its parameters, so a wrong value fails before any work."""
        for i, block in enumerate(self.chunker_params):
            try:
                make_chunker(block | {"tokenizer": block.get("tokenizer", self.tokenizer)})
            except ConfigError as exc:
                raise field_error(f"chunkers[{i}].{exc.field or 'kind'}", exc.reason) from None
        return self

    @property
    def chunker_params(self) -> list[dict[str, Any]]:
        """Each chunker's parameters as set in the config, its name filled in (part of its pairs' fingerprints)."""
        return [{**m.model_dump(exclude_unset=True), "name": m.name or m.kind} for m in self.chunkers]

    @property
    def documents(self) -> DatasetSpec | None:
        """The BEIR dataset judged by its qrels at document level; None for a chunking set judged by spans."""
        return self.dataset.to_spec(self.seed) if isinstance(self.dataset, DatasetBlock) else None

    @property
    def dataset_label(self) -> str:
        """The dataset's name in fingerprints and the manifest: the chunking set as written, or the block's label."""
        documents = self.documents
        return documents.label if documents is not None else str(self.dataset)

    @property
    def span_token_k(self) -> list[int]:
        """The k of the character-level scores; none where relevance is a document's grade (nothing to overlap)."""
        return list(self.token_k) if self.documents is None else []

    @property
    def span_budgets(self) -> list[int]:
        """The context budgets in tokens; none where relevance is a document's grade."""
        return list(self.budgets) if self.documents is None else []

    @property
    def settings(self) -> EvalSettings:
        """The `evaluation:` block as the settings `evaluate` takes."""
        return self.evaluation.to_settings()

    @model_validator(mode="after")
    def _primary_is_a_metric(self) -> ChunkingModel:
        """A ranking metric the study does not compute would rank nothing."""
        listed = {parse_metric(m, self.evaluation.default_k).name for m in self.metrics}
        if self.primary is not None and parse_metric(self.primary, self.evaluation.default_k).name not in listed:
            raise field_error("primary", f"{self.primary} is not one of the study's metrics")
        return self

    @property
    def ranking_metric(self) -> str:
        """The metric the pairs are ranked on: `primary`, else `metrics.primary.default_primary(metrics)`."""
        return self.primary or default_primary(self.metrics) or self.metrics[0]

    @model_validator(mode="after")
    def _depth_reaches_every_cutoff(self) -> ChunkingModel:
        cut = metric_cutoffs(self.metrics, self.evaluation.default_k, self.depth)
        if max(cut, default=0) > self.depth:
            m = self.metrics[cut.index(max(cut))]
            raise field_error("depth", f"depth {self.depth} is below the cutoff of {m}; raise depth to {max(cut)}")
        return self
