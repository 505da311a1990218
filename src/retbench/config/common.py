"""The blocks every study shares: a dataset, a system, the evaluation settings, an encoder.

Each is a declared model (`DatasetBlock`, `SystemBlock`, `EvalSettings`, `EncoderSettings`) that
holds its defaults in exactly one place, so every study reads a dataset, a system or the evaluation
settings the same way. `DatasetSpec` is a dataset block with its sample seed resolved (its fields are part
of the results' fingerprints, so they stay plain and stable); a system's fingerprint is `SystemBlock.identity()`.

A system is held generically (adapter + params): whether the adapter exists and takes those
parameters is checked against its factory by `retrievers.base.check_system`, which each study runs
right after loading, before any work starts.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, model_validator

from retbench.config.base import Block, ConfigPath, NonNegativeInt, PositiveInt, field_error, validate
from retbench.io.irds import PREFIX as IRDS_PREFIX
from retbench.metrics.settings import EvalSettings, Mode, NoRelevant

JoinRule = Literal["title_space_text", "title_newline_text", "text_only"]  # data.corpus.JOIN_RULES


def folder_name(name: str) -> bool:
    """A name usable as one folder of a results directory."""
    return not re.search(r"[/\\\x00-\x1f\x7f]", name) and name.strip() not in ("", ".", "..")


def _folder_name(name: str) -> str:
    if not folder_name(name):
        raise ValueError("a name cannot be empty or contain '/', '\\' or control characters (tabs, newlines)")
    return name


#: a name that becomes one folder of a results directory (a system, a split)
FolderName = Annotated[str, AfterValidator(_folder_name)]


# -- datasets ----------------------------------------------------------------------------------------
def _dataset_shorthand(raw: object) -> object:
    return {"name": raw} if isinstance(raw, str) else raw


class DatasetBlock(Block):
    """A dataset block: `scifact`, or a mapping naming a shipped name, a BEIR folder, `hf:` or `irds:` and a slice."""

    name: str | None = Field(
        None, description="a shipped dataset name (scifact, chunking_eval, rag, ...), hf:<name> or irds:<id>"
    )
    path: ConfigPath | None = Field(None, description="a BEIR folder (relative to the config's folder)")
    hf: str | None = Field(None, description="a Hugging Face dataset name")
    irds: str | None = Field(
        None, description="an ir_datasets id (beir/scifact/test), read through ir_datasets; its qrels are `split`"
    )
    split: FolderName = "test"
    max_queries: PositiveInt | None = Field(None, description="a seeded random sample of the judged queries")
    corpus_sample: PositiveInt | None = Field(
        None, description="keep the judged documents of the selected queries plus random others up to N"
    )
    join_rule: JoinRule = "title_space_text"
    seed: int | None = Field(None, description="of the query and corpus samples (default: the config's seed)")

    @model_validator(mode="after")
    def _named(self) -> DatasetBlock:
        if not (self.path or self.hf or self.irds or self.name):
            raise ValueError("give a dataset name, path, hf or irds")
        return self

    @property
    def spec(self) -> str:
        if self.irds:
            return IRDS_PREFIX + self.irds.removeprefix(IRDS_PREFIX)
        return self.path or (f"hf:{self.hf}" if self.hf else None) or str(self.name)

    def to_spec(self, seed: int = 0) -> DatasetSpec:
        return DatasetSpec(
            self.spec,
            self.split,
            self.max_queries,
            self.corpus_sample,
            self.join_rule,
            self.seed if self.seed is not None else seed,
        )


#: a dataset as written in a config: a name, or a mapping
Dataset = Annotated[DatasetBlock, BeforeValidator(_dataset_shorthand, json_schema_input_type=str | DatasetBlock)]


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset of a study: a shipped name, a BEIR folder, `hf:<name>` or `irds:<id>`, and how much of it to use.

    `max_queries` is a seeded random sample of the judged queries (the same in every study, see
    `sample_ids`); `corpus_sample` keeps every judged document of those queries plus random others.
    """

    spec: str
    split: str = "test"
    max_queries: int | None = None
    corpus_sample: int | None = None
    join_rule: str = "title_space_text"
    seed: int = 0

    @property
    def label(self) -> str:
        """The dataset's column in a leaderboard and the first part of its results keys ("<label>/<system>")."""
        if self.spec.startswith(IRDS_PREFIX):  # beir/scifact/test -> beir-scifact-test: one folder, the id kept
            name = self.spec.removeprefix(IRDS_PREFIX).replace("/", "-")
        else:
            name = Path(self.spec).name if "/" in self.spec else self.spec.removeprefix("hf:")
        return name if self.split == "test" else f"{name}-{self.split}"


def sample_ids(ids: list[str], n: int | None, seed: int | random.Random) -> list[str]:
    """`n` of `ids` drawn at random with `seed`, in their original order (all of them when n is None).

    Every study selects its queries through here, so `max_queries: 50, seed: 0` picks the same
    queries in `run`, `chunking` and `ingest-impact`. A `random.Random` may be passed to go on
    drawing from it afterwards (the corpus sample of `retbench run` does).
    """
    if not n or n >= len(ids):
        return list(ids)
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    keep = set(rng.sample(ids, n))
    return [q for q in ids if q in keep]


# -- systems -----------------------------------------------------------------------------------------
class BM25Params(Block):
    """The scoring parameters of the BM25 adapters (`bm25s`, `rank_bm25`) with their valid ranges, checked when a
    config loads: a k1 near the float maximum makes every score overflow to NaN, so a run would answer no query.
    The adapters' other parameters are checked against their signatures. Numbers written as text are read as
    numbers, as the adapters always have (YAML 1.1 reads `1e308`, with no dot, as text)."""

    model_config = ConfigDict(strict=False, extra="allow")  # the adapter's other keys: checked by its signature

    k1: float = Field(1.5, ge=0.0, le=100.0, description="term-frequency saturation in [0, 100] (0: tf ignored)")
    b: float = Field(0.75, ge=0.0, le=1.0, description="document-length normalisation in [0, 1]")
    delta: float | None = Field(None, ge=0.0, le=10.0, description="BM25L / BM25+ lower bound in [0, 10]")
    epsilon: float = Field(0.25, ge=0.0, le=1.0, description="rank_bm25 okapi's floor on idf, in [0, 1]")

    @model_validator(mode="before")
    @classmethod
    def _no_booleans(cls, data: object) -> object:
        """`k1: true` is a mistake, not 1.0 (lax reading would take it)."""
        if isinstance(data, dict):
            for key, value in data.items():
                if isinstance(value, bool):
                    raise field_error(str(key), f"must be a number, got {value!r}")
        return data


def _adapter_params_schema(schema: dict[str, Any]) -> None:
    """The JSON Schema of a system states the BM25 adapters' parameter ranges (`BM25Params`) for editors."""
    schema["allOf"] = [
        {
            "if": {"properties": {"adapter": {"enum": ["bm25s", "rank_bm25"]}}, "required": ["adapter"]},
            "then": {"properties": {"params": BM25Params.model_json_schema()}},
        }
    ]


class SystemBlock(Block):
    """A retriever: an adapter (a built-in name, an entry point or `module:factory`) and its parameters."""

    model_config = ConfigDict(json_schema_extra=_adapter_params_schema)

    name: FolderName | None = Field(None, description="the system's name in results (default: the adapter)")
    adapter: str = Field(min_length=1, description="bm25s, rank_bm25, dense, hybrid, a store, or module:factory")
    params: dict[str, Any] = Field(
        default_factory=dict, description="the adapter's keyword arguments (checked against its factory)"
    )

    @property
    def label(self) -> str:
        """The system's name in results: `name`, else its adapter."""
        return self.name or self.adapter

    def identity(self) -> dict[str, Any]:
        """What the system's ranked lists depend on (part of its cells' fingerprints, so stable and plain)."""
        return {"name": self.label, "adapter": self.adapter, "params": dict(self.params)}


def unique_names(systems: list[SystemBlock]) -> list[SystemBlock]:
    """The list, refused when two systems share a name (their results would share a folder)."""
    seen: set[str] = set()
    for i, s in enumerate(systems):
        name = s.name or s.adapter
        if name in seen:
            raise field_error(f"[{i}].name", f"duplicate system name {name!r}")
        seen.add(name)
    return systems


# -- evaluation --------------------------------------------------------------------------------------
_EVAL_DEFAULTS = EvalSettings()


class EvalBlock(Block, frozen=True):
    """The `evaluation:` block, parsed into `EvalSettings` (metrics/settings.py: what each field means, and the
    defaults, which live there only)."""

    relevance_level: PositiveInt = _EVAL_DEFAULTS.relevance_level
    # None: by the mode (skip in trec_eval, zero in pytrec_eval), resolved in EvalSettings.no_relevant_policy
    no_relevant: NoRelevant | None = _EVAL_DEFAULTS.no_relevant  # type: ignore[assignment]
    mode: Mode = _EVAL_DEFAULTS.mode  # type: ignore[assignment]
    default_k: PositiveInt = _EVAL_DEFAULTS.default_k
    bootstrap: PositiveInt = _EVAL_DEFAULTS.bootstrap
    seed: int = _EVAL_DEFAULTS.seed
    ignore_identical_ids: bool | None = _EVAL_DEFAULTS.ignore_identical_ids
    judged_only: bool = _EVAL_DEFAULTS.judged_only
    max_docs: PositiveInt | None = _EVAL_DEFAULTS.max_docs
    collection_size: PositiveInt | None = _EVAL_DEFAULTS.collection_size

    @classmethod
    def from_config(cls, raw: object, source: str | None = None, where: str = "evaluation") -> EvalSettings:
        """The block as the `EvalSettings` that `evaluate` takes; errors name `<where>.<field>`."""
        return validate(cls, raw or {}, source, prefix=where).to_settings()

    def to_settings(self) -> EvalSettings:
        return EvalSettings(**self.model_dump())


# -- encoders ----------------------------------------------------------------------------------------
class EncoderSettings(Block, frozen=True):
    """Keyword arguments of `retbench.retrievers.encoders.Encoder` (a test holds the two in step)."""

    model: str | None = Field(None, description="a sentence-transformers model name or folder")
    query_prefix: str = ""
    doc_prefix: str = ""
    query_prompt_name: str | None = None
    doc_prompt_name: str | None = None
    normalize: bool = True
    batch_size: PositiveInt = 32
    max_seq_length: PositiveInt | None = None
    device: str = "cpu"
    cache: bool = True
    cache_dir: str | None = None
    shard_size: PositiveInt = 1024
    trust_remote_code: bool = False

    @classmethod
    def from_config(cls, raw: object, source: str | None = None, where: str = "encoder") -> EncoderSettings:
        return validate(cls, raw or {}, source, prefix=where)

    @property
    def options(self) -> dict[str, Any]:
        """Only the options the config set (the Encoder's own defaults apply to the rest)."""
        return self.model_dump(exclude_unset=True)


__all__ = [
    "Dataset",
    "DatasetBlock",
    "DatasetSpec",
    "EncoderSettings",
    "EvalBlock",
    "EvalSettings",
    "FolderName",
    "JoinRule",
    "NonNegativeInt",
    "SystemBlock",
    "folder_name",
    "sample_ids",
    "unique_names",
]
