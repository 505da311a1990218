"""The typed results contract: what a cell returns (`SystemResult`) and what a study returns (`StudyResult`).

Everything downstream (reports, leaderboard, compare, gate, plan, history, the MLflow export) takes these
objects; only `results.read` builds one from disk and only `results.write` puts one there.

A system's metric values live in `SystemResult.metrics` and its blocks (coverage, latency, judge,
reference, rerank, breakdown, usage, resources, error) in fields of their own, so no metric name can
collide with a block: a plugin metric named `latency` keeps its value beside the latency block.

metrics.json, schema version 2 (`SCHEMA_VERSION`):

    {"schema_version": 2,
     "systems": {"<key>": {"metrics": {"<metric>": {"value", "ci_low", "ci_high", "n", "of"?, "aggregate",
                                                   "estimate"?}},
                           "coverage": {...}, "latency": {...}, "judge"?, "reference"?, "rerank"?,
                           "first_stage"?, "breakdown"?, "usage"?, "resources"?, "extra"?, "error"?}}}

Version 1 (no `schema_version`: `{"<key>": {"<metric>": mean, "<block>": {...}}}`, blocks and means in one
namespace, the CIs in each system's aggregates.json) still reads: `results.read` converts it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from retbench.errors import InputError
from retbench.io.files import load_yaml_text
from retbench.jsontypes import opt_float
from retbench.results.blocks import Breakdown, JudgeBlock, RerankSummary

if TYPE_CHECKING:
    from retbench.data import Corpus, Qrels, Run
    from retbench.data.answers import SystemAnswer
    from retbench.evaluation import Evaluation

SCHEMA_VERSION = 2

#: a JSON block another module computes and owns the shape of (see each field's comment for the producer)
Block = dict[str, Any]


def _float(value: object) -> float:
    """A stored number (null: no value, read as NaN)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


@dataclass(frozen=True)
class MetricValue:
    """One metric of one system: its value, how sure it is, and where its labels came from.

    `aggregate` says how the per-query values were combined ("mean"; trec_eval's "gmean" for gm_* measures,
    "sum" for num_*). `n` counts the queries behind the value, `of` the counted queries when the metric applies
    to only some. `estimate` is the label-source entry of `estimates.estimate_block` (source human/llm/ppi,
    n_human, n_llm, its own mean and interval), None for plain human labels.
    """

    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    of: int | None = None
    aggregate: str = "mean"
    estimate: Block | None = None

    @property
    def source(self) -> str:
        """human, llm or ppi."""
        return str((self.estimate or {}).get("source") or "human")

    @property
    def n_human(self) -> int | None:
        return (self.estimate or {}).get("n_human")

    @property
    def n_llm(self) -> int | None:
        return (self.estimate or {}).get("n_llm")

    @property
    def ci(self) -> tuple[float, float] | None:
        if self.ci_low is None or self.ci_high is None or math.isnan(self.ci_low) or math.isnan(self.ci_high):
            return None
        return (self.ci_low, self.ci_high)

    @classmethod
    def from_aggregate(cls, row: Mapping[str, object]) -> MetricValue:
        """From one entry of `Evaluation.aggregate` (or a version-1 aggregates.json)."""
        n, of, est = row.get("n"), row.get("of"), row.get("estimate")
        return cls(
            _float(row.get("mean", row.get("value"))),
            opt_float(row.get("ci_low")),
            opt_float(row.get("ci_high")),
            n if isinstance(n, int) else None,
            of if isinstance(of, int) else None,
            str(row.get("aggregate") or "mean"),
            dict(est) if isinstance(est, Mapping) else None,
        )

    def to_dict(self) -> Block:
        out: Block = {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}
        if self.of is not None:
            out["of"] = self.of
        out["aggregate"] = self.aggregate
        if self.estimate is not None:
            out["estimate"] = self.estimate
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> MetricValue:
        return cls.from_aggregate({**d, "mean": d.get("value")})


def metric_values(aggregates: Mapping[str, Mapping[str, object]], metrics: list[str]) -> dict[str, MetricValue]:
    """The typed values of `Evaluation.aggregate`'s output, in the order of `metrics`."""
    return {m: MetricValue.from_aggregate(aggregates[m]) for m in metrics if m in aggregates}


#: the block fields of `SystemResult`, in the order metrics.json writes them
BLOCKS = (
    "coverage",
    "latency",
    "judge",
    "reference",
    "first_stage",
    "rerank",
    "breakdown",
    "usage",
    "resources",
    "extra",
    "error",
)


@dataclass
class SystemResult:
    """One system on one dataset (one cell): metric values in their own namespace, and typed blocks.

    A system that failed as a whole (not built, indexed or searched) has `error` set and no metrics.
    """

    name: str
    metrics: dict[str, MetricValue] = field(default_factory=dict)
    coverage: Block = field(default_factory=dict)  # metrics.coverage.coverage: answered, judged, failed, ...
    latency: Block = field(default_factory=dict)  # results.usage.stage_latency: stages, suite_seconds, query
    judge: JudgeBlock | None = None  # studies.judging.judged_summary: calls, tokens, judged N of M
    reference: Block | None = None  # metrics.agreement.reference_agreement: overlap@k with the reference
    first_stage: dict[str, MetricValue] | None = None  # a reranked system's first-stage values
    rerank: RerankSummary | None = None  # studies.rerank: depth, ceiling, reranked vs first stage
    breakdown: Breakdown | None = None  # studies.cell.breakdown: group -> {n, means, rates}
    usage: Block | None = None  # results.usage.llm_usage: LLM stage -> calls, tokens, cost
    resources: Block | None = None  # studies.resources: stage seconds, peak RSS, devices, index size
    extra: Block | None = None  # study-specific figures (a chunking pair's chunker, chunk statistics, timings)
    error: str | None = None

    @property
    def failed(self) -> bool:
        """The system failed as a whole."""
        return self.error is not None

    def means(self) -> dict[str, float]:
        """metric -> value (NaN: no counted query)."""
        return {m: v.value for m, v in self.metrics.items()}

    def judged_counts(self) -> dict[str, tuple[int, int]]:
        """{judged metric: (verdicts that scored, queries it applies to)} from the `judge` block."""
        block = self.judge
        metrics = block.get("metrics") if isinstance(block, Mapping) else None
        return {m: (int(c["judged"]), int(c["of"])) for m, c in (metrics or {}).items()}

    def value(self, metric: str) -> float | None:
        """The metric's value, None when the system lacks it."""
        v = self.metrics.get(metric)
        return None if v is None else v.value

    def to_dict(self) -> Block:
        """The system's entry in metrics.json (version 2)."""
        out: Block = {"metrics": {m: v.to_dict() for m, v in self.metrics.items()}}
        for name in BLOCKS:
            block = getattr(self, name)
            if name == "first_stage" and block is not None:
                block = {m: v.to_dict() for m, v in block.items()}
            if block is not None and (block or name in ("coverage", "latency")):
                out[name] = block
        return out

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> SystemResult:
        """From a version-2 metrics.json entry."""
        first = d.get("first_stage")
        return cls(
            name,
            {m: MetricValue.from_dict(v) for m, v in (d.get("metrics") or {}).items()},
            dict(d.get("coverage") or {}),
            dict(d.get("latency") or {}),
            d.get("judge"),
            d.get("reference"),
            {m: MetricValue.from_dict(v) for m, v in first.items()} if isinstance(first, Mapping) else None,
            d.get("rerank"),
            d.get("breakdown"),
            d.get("usage"),
            d.get("resources"),
            d.get("extra"),
            d.get("error"),
        )


@dataclass
class StudyManifest:
    """manifest.json: what ran (the config as written), when, with which versions, where, and each system's
    manifest (adapter, describe, fingerprints, timings). `data` is the whole stored object (study-specific
    blocks included: a chunking study's chunkers); the properties read its common fields."""

    data: Block = field(default_factory=dict)

    @property
    def title(self) -> str | None:
        v = self.data.get("experiment")
        return str(v) if v else None

    @property
    def created(self) -> str:
        return str(self.data.get("created", ""))

    @property
    def datasets(self) -> list[Block]:
        return [d for d in self.data.get("datasets") or [] if isinstance(d, dict)]

    @property
    def versions(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.data.get("versions") or {}).items()}

    @property
    def machine(self) -> Block:
        return dict(self.data.get("machine") or {})

    @property
    def metrics(self) -> list[str]:
        asked = self.data.get("metrics")
        return [str(m) for m in asked] if isinstance(asked, list) else []

    @property
    def mode(self) -> str:
        return str((self.data.get("evaluation") or {}).get("mode") or "trec_eval")

    @property
    def config(self) -> Block:
        """The config the study ran on: the validated model it recorded (`config.resolved`, every default filled
        in), else, in a manifest written before that was recorded, its stored text parsed again."""
        rec = self.data.get("config")
        if isinstance(rec, Mapping) and isinstance(rec.get("resolved"), Mapping):
            return dict(rec["resolved"])
        return config_from_manifest(self.data)

    @property
    def baseline(self) -> str | None:
        """The experiment's `baseline:` system (None: not set; a report then compares against the first)."""
        value = self.config.get("baseline")
        return str(value) if value is not None else None

    @property
    def primary(self) -> list[str]:
        """The experiment's `primary:` metrics as written ([]: not set; the report then picks the default rule's)."""
        value = self.config.get("primary")
        return [str(m) for m in value] if isinstance(value, list) else []

    @property
    def costs(self) -> Block | None:
        """The experiment's `costs:` block (prices), None when it states none."""
        value = self.config.get("costs")
        return dict(value) if isinstance(value, Mapping) else None

    def system(self, key: str) -> Block:
        """One system's manifest ({} when not recorded)."""
        systems = self.data.get("systems")
        entry = systems.get(key) if isinstance(systems, Mapping) else None
        return dict(entry) if isinstance(entry, Mapping) else {}

    def get(self, key: str, default: Any = None) -> Any:
        """A stored field by name (study-specific blocks)."""
        return self.data.get(key, default)

    def to_dict(self) -> Block:
        return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in self.data.items() if k != "schema_version"}}


@dataclass
class SystemTables:
    """What a cell computed beside its summary, held in memory by the study that just ran it."""

    evaluation: Evaluation
    run: Run
    answers: dict[str, SystemAnswer] = field(default_factory=dict)
    curves: dict[str, list[float]] | None = None  # metric family -> mean at k = 1 .. depth


@dataclass
class DatasetTexts:
    """The one dataset a study ran on, in memory, for the report's drill-down (documents and query texts)."""

    qrels: Qrels
    corpus: Corpus
    queries: Mapping[str, str]


class TableSource(Protocol):
    """Where a read-back result finds a system's per-query table and run (`results.read.FolderTables`)."""

    def evaluation(self, key: str) -> Evaluation: ...

    def run(self, key: str) -> Run: ...

    def queries(self) -> Mapping[str, str]: ...


@dataclass
class StudyResult:
    """What a study returns: its manifest and every system's result, by key in run order.

    `tables` holds the per-query tables and runs the study computed in memory (a study that just ran);
    a system without one (a cell finished earlier, a folder read back) gets them from `source`, the reader's
    access to the folder. `texts` is the dataset the drill-down shows, when the study holds it.
    """

    manifest: StudyManifest
    systems: dict[str, SystemResult]
    root: Path | None = None
    tables: dict[str, SystemTables] = field(default_factory=dict)
    texts: DatasetTexts | None = None
    source: TableSource | None = None

    def __iter__(self) -> Iterator[SystemResult]:
        return iter(self.systems.values())

    def __getitem__(self, key: str) -> SystemResult:
        if key not in self.systems:
            have = ", ".join(self.systems)
            raise InputError(f"no system {key!r} in results (have: {have})", path=self.root, field="system")
        return self.systems[key]

    def evaluation(self, key: str) -> Evaluation:
        """The system's per-query table, carrying its stored coverage."""
        self[key]
        ev = self.tables[key].evaluation if key in self.tables else self._source().evaluation(key)
        ev.system = key
        ev.coverage = ev.coverage or dict(self.systems[key].coverage)
        return ev

    def run(self, key: str) -> Run:
        self[key]
        return self.tables[key].run if key in self.tables else self._source().run(key)

    @property
    def queries(self) -> Mapping[str, str]:
        """Query texts of the dataset (empty when neither held nor findable)."""
        if self.texts is not None:
            return self.texts.queries
        return self.source.queries() if self.source is not None else {}

    def depth(self, key: str, run: Run | None = None) -> int:
        """How deep the system searched: the depth its cell recorded beside its coverage, else the
        config's `depth`, else its longest ranking."""
        found = recorded_depth(self[key].coverage) or config_depth(self.manifest.data)
        return found or (run or self.run(key)).depth

    def to_dict(self) -> Block:
        """metrics.json (version 2)."""
        return {"schema_version": SCHEMA_VERSION, "systems": {k: s.to_dict() for k, s in self.systems.items()}}

    def _source(self) -> TableSource:
        if self.source is None:
            raise InputError("these results hold no per-query tables (not read from a folder)", path=self.root)
        return self.source


def recorded_depth(cov: Mapping[str, object] | None) -> int | None:
    """The depth stored beside a system's coverage (metrics.json, a history entry), when it was."""
    depth = (cov or {}).get("depth")
    return depth if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0 else None


def config_from_manifest(manifest: Mapping[str, object] | StudyManifest) -> dict[str, Any]:
    """The parsed config a manifest records (its stored text parsed again, with the same alias bound)."""
    data = manifest.data if isinstance(manifest, StudyManifest) else manifest
    rec = data.get("config") if isinstance(data, Mapping) else None
    if isinstance(rec, Mapping) and isinstance(rec.get("text"), str) and "sha256" in rec:
        parsed = load_yaml_text(rec["text"], str(rec.get("file") or "manifest.json:config"))
        return dict(parsed) if isinstance(parsed, Mapping) else {}
    return dict(rec) if isinstance(rec, Mapping) else {}


def config_depth(manifest: Mapping[str, object] | StudyManifest) -> int | None:
    """The `depth` of the config a manifest records, or None when it has none (or cannot be read)."""
    try:
        depth = config_from_manifest(manifest).get("depth")
    except InputError:
        return None
    return depth if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0 else None
