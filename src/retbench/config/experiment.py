"""The experiment (`retbench run`) and stress (`retbench stress`) config models.

    name: scifact
    output: results/scifact
    depth: 100                     # documents retrieved per query (at least every metric's cutoff)
    metrics: [ndcg@10, recall@100, mrr@10, map, recall@5]
    evaluation: {relevance_level: 1, no_relevant: skip, mode: trec_eval, default_k: 5}
    datasets:
      - {name: scifact, split: test}          # a shipped name, a BEIR folder, or hf:<name>
    systems:
      - {name: bm25, adapter: bm25s, params: {k1: 1.5, b: 0.75}}

A suite (several datasets, one leaderboard) is an experiment with more than one dataset.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, model_validator

from retbench.config.base import Block, NonNegativeInt, PositiveInt, field_error
from retbench.config.common import Dataset, DatasetSpec, EncoderSettings, EvalBlock, SystemBlock, unique_names
from retbench.config.costs import CostsBlock
from retbench.config.judge import JudgeSettings
from retbench.config.rubric import Rubrics
from retbench.config.study import Study
from retbench.errors import InputError
from retbench.metrics.judged import JUDGED_METRICS
from retbench.metrics.primary import default_primary
from retbench.metrics.registry import DEFAULT_METRICS, parse_metric


def _metric_name(name: str) -> str:
    try:
        parse_metric(name)
    except InputError as exc:
        raise ValueError(exc.reason) from None
    return name


#: a metric name the registry reads (ndcg@10, recall@100, ndcg_cut_10, P(rel=2)@5, ...)
MetricName = Annotated[str, AfterValidator(_metric_name)]


def metric_cutoffs(metrics: list[str], default_k: int, depth: int) -> list[int]:
    """Each metric's cutoff (a metric without one ranks the whole list: `depth`)."""
    return [parse_metric(m, default_k).k or depth for m in metrics]


#: the fusion methods and score normalisations a config may name: their one home (retrievers/fusion.py implements
#: each and its module docstring gives the formulas; retrievers/fusion_options.py adds ranx's spellings)
FusionName = Literal[
    "rrf",
    "weighted",
    "wsum",
    "combsum",
    "combmnz",
    "combanz",
    "combgmnz",
    "combmax",
    "combmin",
    "combmed",
    "wmnz",
    "mixed",
    "isr",
    "log_isr",
    "logn_isr",
    "rbc",
    "borda",
    "weighted_borda",
    "condorcet",
    "weighted_condorcet",
]
NormalizationName = Literal["none", "minmax", "max", "sum", "zscore", "rank", "borda"]
#: the largest fusion weight and RRF k a config may give (retrievers/fusion_options.py reads these): weights are relative
#: (only their ratios matter), and a weight near the float maximum makes the fused sum overflow to infinity
MAX_FUSION_WEIGHT = 1e6
MAX_RRF_K = 1e6


# -- the optional blocks of a system -------------------------------------------------------------------
class RerankFuseBlock(Block):
    """Mix the first stage's ranking into the reranked order (retrievers/rerank/stage.py, RerankFusion)."""

    # retrievers/fusion_options.py reads its FUSIONS and NORMALIZATIONS from these two Literals
    fusion: FusionName = "rrf"
    weights: list[Annotated[float, Field(ge=0, le=MAX_FUSION_WEIGHT, allow_inf_nan=False)]] = Field(
        [1.0, 1.0], min_length=2, max_length=2, description="[first stage, reranker]; at least one above 0"
    )
    rrf_k: Annotated[float, Field(ge=0, le=MAX_RRF_K, allow_inf_nan=False)] = 60.0
    normalization: NormalizationName = "minmax"
    param: float | None = Field(None, description="the method's gamma (combgmnz), sigma (logn_isr) or phi (rbc)")


class RerankBlock(Block):
    """A second stage that re-orders a system's top `depth` documents; other keys go to the reranker."""

    model_config = ConfigDict(extra="allow")

    kind: str = Field(description="cross_encoder, bi_encoder, http, or module:factory")
    depth: PositiveInt = Field(description="first-stage documents reranked (at least every metric's cutoff)")
    cache: bool = True
    queries_per_call: PositiveInt = 16
    timeout_s: float | None = Field(300.0, gt=0.0, description="seconds per reranker call (null: no deadline)")
    fuse: RerankFuseBlock | None = Field(
        None, description="fuse with the first stage's ranking instead of replacing it"
    )

    @property
    def params(self) -> dict[str, Any]:
        """The reranker's own keyword arguments: every key the block does not declare."""
        return dict(self.model_extra or {})


class GenerateBlock(Block):
    """Answers from a chat model over the system's own top retrieved chunks (llm/generate.py)."""

    llm: JudgeSettings
    prompt: str = "answer_v1"
    context_k: PositiveInt = 3
    abstain: str = Field("I cannot answer from the context.", min_length=1)
    max_chars: PositiveInt = 1200


class ScopeBlock(Block):
    """A scope stage before the search: a folder or metadata scope chosen per query (retrievers/scope.py)."""

    selector: str = Field(
        min_length=1, description="folder_of_query (metadata.folder), metadata (metadata.scope) or module:function"
    )
    folder_mode: Literal["off", "on", "on_with_fallback"] = Field(
        "on", description="off: no stage; on: search the scope only; on_with_fallback: search everything when empty"
    )


class ScopedSystem(SystemBlock):
    """A system that may choose a scope per query before searching (`retbench run` and `retbench chunking`)."""

    scope: ScopeBlock | None = None
    _stages: ClassVar[tuple[str, ...]] = ("scope",)

    @property
    def scoped(self) -> bool:
        """Does this system have a scope stage (a `scope:` block whose folder_mode is not off)?"""
        return self.scope is not None and self.scope.folder_mode != "off"

    def identity(self) -> dict[str, Any]:
        """What the system's ranked lists depend on: adapter, parameters and its stage blocks as set."""
        out = super().identity()
        for key in self._stages:
            block = getattr(self, key)
            if block is not None:
                out[key] = block.model_dump(exclude_unset=True)
        return out


class ExperimentSystem(ScopedSystem):
    """A system of `retbench run`, optionally scoped, reranked or answering."""

    rerank: RerankBlock | None = None
    generate: GenerateBlock | None = None
    _stages: ClassVar[tuple[str, ...]] = ("scope", "rerank", "generate")


# -- the experiment's other blocks ---------------------------------------------------------------------
def _executor_shorthand(raw: object) -> object:
    return {"kind": raw} if isinstance(raw, str) else raw


class ExecutorBlock(Block):
    """Where encoding and search run: in this process, or spread over a Ray cluster."""

    kind: Literal["in_process", "ray"] = "in_process"
    address: str | None = Field(None, description="ray://host:10001 or auto (default: $RAY_ADDRESS, else local)")
    workers: PositiveInt | None = None
    num_cpus: PositiveInt | None = None
    max_retries: NonNegativeInt = 3


Executor = Annotated[ExecutorBlock, BeforeValidator(_executor_shorthand, json_schema_input_type=str | ExecutorBlock)]


def _reference_shorthand(raw: object) -> object:
    return {"system": raw} if isinstance(raw, str) else raw


class ReferenceBlock(Block):
    """A system (exact search) whose top k the others are measured against (overlap@k)."""

    system: str
    k: PositiveInt = 10


Reference = Annotated[
    ReferenceBlock, BeforeValidator(_reference_shorthand, json_schema_input_type=str | ReferenceBlock)
]


class JudgingBlock(Block):
    """What goes into the judge's prompts for the judged answer metrics (studies/judging.py)."""

    context_k: PositiveInt = 3
    questions: PositiveInt = 3
    max_chars: PositiveInt = 600
    prompts: dict[
        Literal["claims", "support", "context_relevance", "questions", "groundedness", "correctness", "abstention"],
        str,
    ] = Field(default_factory=dict, description="a prompt kind -> another versioned template")
    encoder: EncoderSettings = Field(default_factory=EncoderSettings)


class ExperimentModel(Study):
    """A `retbench run` experiment: every system on every dataset (a suite when there are several)."""

    name: str | None = Field(None, description="default: the config file's name")
    description: str | None = None
    output: str | None = Field(None, description="the results directory (default: results/<name>)")
    depth: PositiveInt = Field(100, description="documents retrieved per query")
    # declared before `metrics`: validating the rubrics declares them as metrics that `metrics` may then name
    rubrics: Rubrics = Field(default_factory=list, description="judged metrics defined by a rubric (config/rubric.py)")
    metrics: list[MetricName] = Field(default_factory=lambda: list(DEFAULT_METRICS), min_length=1)
    evaluation: EvalBlock = Field(default_factory=EvalBlock)
    datasets: list[Dataset] = Field(min_length=1)
    systems: Annotated[list[ExperimentSystem], AfterValidator(unique_names)] = Field(min_length=1)
    batch_size: PositiveInt = Field(64, description="queries per search call")
    seed: int = Field(0, description="of query and corpus samples (a dataset's own seed wins)")
    history: str | None = Field(None, description="the history file `run --history` adds to")
    executor: Executor = Field(default_factory=ExecutorBlock)
    reference: Reference | None = None
    judge: JudgeSettings | None = Field(None, description="the LLM of the judged answer metrics")
    costs: CostsBlock | None = Field(None, description="stated prices: cost per 1,000 queries and of indexing")
    judging: JudgingBlock | None = None
    baseline: str | None = Field(
        None, description="the system every other is compared with in the report and `compare` (default: the first)"
    )
    primary: list[MetricName] | None = Field(
        None,
        min_length=1,
        description="the metrics the report and `compare` test for significance; the first also ranks the systems "
        "(rank intervals, tied for first, suite leaderboards). Default: the first of `metrics` that measures the "
        "systems, not a count, the labels' coverage (judged, holes) or scope_miss_rate (metrics.primary.default_primary)",
    )

    @model_validator(mode="after")
    def _priced_systems_exist(self) -> ExperimentModel:
        """A price for a system the experiment does not have would silently price nothing."""
        names = [s.name or s.adapter for s in self.systems]
        for name in self.costs.systems if self.costs else {}:
            if name not in names:
                raise field_error(f"costs.systems.{name}", f"no system is named {name!r} (have: {', '.join(names)})")
        return self

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentModel:
        """Checks across fields: depth covers every cutoff, the reference is a system, a judged metric has a judge."""
        cut = metric_cutoffs(self.metrics, self.evaluation.default_k, self.depth)
        deepest = max(cut, default=0)
        if deepest > self.depth:  # the metric would be computed on a shorter list than it names, silently
            m = self.metrics[cut.index(deepest)]
            raise field_error(
                "depth",
                f"depth {self.depth} is below the cutoff of {m} ({deepest}): it would be computed on "
                f"{self.depth} documents; raise depth to at least {deepest} or drop the metric",
            )
        if self.reference is not None:
            names = [s.name or s.adapter for s in self.systems]
            if self.reference.system not in names:
                raise field_error(
                    "reference",
                    f"must name one of the systems ({', '.join(names)}), got {self.reference.system!r}",
                )
            if self.reference.k > self.depth:
                raise field_error("reference.k", f"must not exceed depth ({self.depth})")
        names = [s.name or s.adapter for s in self.systems]
        if self.baseline is not None and self.baseline not in names:
            raise field_error("baseline", f"must name one of the systems ({', '.join(names)}), got {self.baseline!r}")
        listed = {parse_metric(m, self.evaluation.default_k).name for m in self.metrics}
        for i, m in enumerate(self.primary or []):
            if parse_metric(m, self.evaluation.default_k).name not in listed:
                raise field_error(f"primary[{i}]", f"{m} is not one of the experiment's metrics")
        if self.judge is None:
            if self.judging is not None:
                raise field_error("judging", "judging: needs a judge: block")
            own = {r.name for r in self.rubrics if r.judge is not None}  # a rubric with its own judge needs none here
            asked = [i for i, m in enumerate(self.metrics) if m in JUDGED_METRICS and m not in own]
            if asked:
                raise field_error(
                    f"metrics[{asked[0]}]",
                    "a judged metric needs a judge: block (an LLM endpoint), the experiment's or its rubric's own",
                )
        self._rerank_depths()
        return self

    def _rerank_depths(self) -> None:
        """A rerank depth below a metric's cutoff would cap that metric at the reranked list's length, silently."""
        top = max(self.cutoffs, default=0)
        for i, s in enumerate(self.systems):
            if s.rerank is not None and s.rerank.depth < top:
                raise field_error(
                    f"systems[{i}].rerank.depth",
                    f"rerank depth {s.rerank.depth} is below the largest metric cutoff {top}: a metric at {top} "
                    f"would only see {s.rerank.depth} reranked documents; raise depth to at least {top}",
                )

    # -- what the study derives from the model ---------------------------------------------------------
    @property
    def metric_names(self) -> list[str]:
        """The metrics by their registry names (ndcg_cut_10 -> ndcg@10), in the config's order."""
        return [parse_metric(m, self.evaluation.default_k).name for m in self.metrics]

    @property
    def ranking_metric(self) -> str:
        """The metric systems are ranked on: the first of `primary`, else `metrics.primary.default_primary(metrics)`."""
        if self.primary:
            return parse_metric(self.primary[0], self.evaluation.default_k).name
        return default_primary(self.metric_names) or self.metric_names[0]

    @property
    def cutoffs(self) -> list[int]:
        """Each metric's cutoff (`depth` for a metric that ranks the whole list)."""
        return metric_cutoffs(self.metrics, self.evaluation.default_k, self.depth)

    @property
    def dataset_specs(self) -> list[DatasetSpec]:
        """The datasets, each with its sample seed resolved (its own, else the config's `seed`)."""
        return [d.to_spec(self.seed) for d in self.datasets]

    @property
    def judging_settings(self) -> JudgingBlock:
        """The `judging:` block, its defaults when it is absent."""
        return self.judging if self.judging is not None else JudgingBlock()
