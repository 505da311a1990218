"""What a stress run returns: per-level figures, ingestion, failures and the run's totals (`StressSummary`).

The study (`retbench.studies.stress`) fills a `StressSummary` as it goes and writes it after every level
(`write_stress`: summary.json); the report (`retbench.report.stress`, `report.stress_stream`) formats one and
nothing else, so a report can be re-rendered from the file alone (`read_stress`). summary.json keeps its keys in
this order: the run's identity (system .. complete), warnings, then where present case, resources, ingest and
streaming, then the totals (requests .. exit_code). Latencies are milliseconds; rates are shares of requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from retbench.io.files import write_json
from retbench.jsontypes import JSONObject, as_object, counts, opt_float, opt_int, opt_str
from retbench.results.files import read_json
from retbench.results.stress_figures import Failure, LatencySummary
from retbench.results.stress_stream import StreamingFigures


@dataclass(frozen=True)
class MetricMeans:
    """A metric over the stressed query set: failed or unasked queries count 0 (`mean`); the success-only mean
    is over the answered queries and is only ever shown labelled as such."""

    mean: float | None
    mean_success_only: float | None


@dataclass(frozen=True)
class LevelQuality:
    """Quality on the very responses a level got: "scored N of M" (N answered of M judged queries)."""

    scored: int
    of: int
    skipped_no_relevant: int
    statuses: dict[str, int]
    metrics: dict[str, MetricMeans]

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> LevelQuality:
        return cls(
            opt_int(d.get("scored")) or 0,
            opt_int(d.get("of")) or 0,
            opt_int(d.get("skipped_no_relevant")) or 0,
            counts(d.get("statuses")),
            {
                str(m): MetricMeans(
                    opt_float(as_object(v).get("mean")), opt_float(as_object(v).get("mean_success_only"))
                )
                for m, v in as_object(d.get("metrics")).items()
            },
        )


@dataclass(frozen=True)
class WarmUp:
    """The warm-up requests of a level (run and counted once, resumed or not) and how many failed."""

    requests: int
    failed: int


@dataclass
class LevelFigures:
    """One concurrency level: QPS (completed requests over the wall time they took), latency of successes and
    failures apart, outcome counts and rates, retries; then its warm-up, why it stopped early, its quality."""

    concurrency: int
    planned: int | None
    completed: int
    answered: int
    failed: int
    elapsed_s: float
    qps: float | None
    latency_success: LatencySummary
    latency_failure: LatencySummary
    counts: dict[str, int]
    rates: dict[str, float]
    failure_rate: float
    invalid_kinds: dict[str | None, int]
    error_types: dict[str, int]
    retries: int
    recovered_by_retry: int
    segments: int
    warmup: WarmUp | None = None
    stopped: str | None = None
    quality: LevelQuality | None = None

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        success, failure = out.pop("latency_success"), out.pop("latency_failure")
        head = {
            k: out.pop(k) for k in ("concurrency", "planned", "completed", "answered", "failed", "elapsed_s", "qps")
        }
        tail = {k: out.pop(k) for k in ("warmup", "stopped", "quality")}
        return {**head, "latency_ms": {"success": success, "failure": failure}, **out, **tail}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> LevelFigures:
        lat = as_object(d.get("latency_ms"))
        warm, quality = d.get("warmup"), d.get("quality")
        return cls(
            concurrency=opt_int(d.get("concurrency")) or 0,
            planned=opt_int(d.get("planned")),
            completed=opt_int(d.get("completed")) or 0,
            answered=opt_int(d.get("answered")) or 0,
            failed=opt_int(d.get("failed")) or 0,
            elapsed_s=opt_float(d.get("elapsed_s")) or 0.0,
            qps=opt_float(d.get("qps")),
            latency_success=LatencySummary.from_dict(as_object(lat.get("success"))),
            latency_failure=LatencySummary.from_dict(as_object(lat.get("failure"))),
            counts=counts(d.get("counts")),
            rates={str(k): float(v) for k, v in as_object(d.get("rates")).items()},  # type: ignore[arg-type]
            failure_rate=opt_float(d.get("failure_rate")) or 0.0,
            invalid_kinds={k: int(v) for k, v in as_object(d.get("invalid_kinds")).items()},  # type: ignore[call-overload]
            error_types=counts(d.get("error_types")),
            retries=opt_int(d.get("retries")) or 0,
            recovered_by_retry=opt_int(d.get("recovered_by_retry")) or 0,
            segments=opt_int(d.get("segments")) or 0,
            warmup=WarmUp(**warm) if isinstance(warm, Mapping) else None,  # type: ignore[arg-type]
            stopped=opt_str(d.get("stopped")),
            quality=LevelQuality.from_dict(quality) if isinstance(quality, Mapping) else None,
        )


@dataclass(frozen=True)
class IngestFigures:
    """Indexing the corpus in batches (the first via `index`, the rest via `add`): timing, and the first write
    that failed, after which nothing more was written."""

    documents: int
    written: int
    batch_size: int
    incremental: bool
    batches: int
    seconds: float
    docs_per_s: float | None
    batch_seconds: LatencySummary
    first_failure: Failure | None
    note: str

    def to_dict(self) -> dict[str, object]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["batch_seconds"] = self.batch_seconds.to_dict()
        out["first_failure"] = None if self.first_failure is None else self.first_failure.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> IngestFigures:
        first = d.get("first_failure")
        return cls(
            opt_int(d.get("documents")) or 0,
            opt_int(d.get("written")) or 0,
            opt_int(d.get("batch_size")) or 0,
            bool(d.get("incremental")),
            opt_int(d.get("batches")) or 0,
            opt_float(d.get("seconds")) or 0.0,
            opt_float(d.get("docs_per_s")),
            LatencySummary.from_dict(as_object(d.get("batch_seconds"))),
            Failure(first) if isinstance(first, Mapping) else None,
            str(d.get("note") or ""),
        )


@dataclass(frozen=True)
class JournalFigures:
    """What the request journal held when the summary was written (a torn last line is dropped, a duplicate
    record skipped)."""

    records: int
    torn_lines_dropped: int
    duplicates: int


#: the run's identity, in summary.json's order
_HEAD = (
    "system",
    "adapter",
    "faults",
    "dataset",
    "split",
    "queries",
    "corpus",
    "k",
    "metrics",
    "settings",
    "mode",
    "resumed",
    "levels",
    "complete",
    "warnings",
)


@dataclass
class StressSummary:
    """A stress run as far as it went (summary.json). The batch case fills `ingest` and `levels`, the streaming
    case `streaming` (`case` "streaming"); the totals (requests .. exit_code) are set when the summary is saved."""

    system: str
    adapter: str
    dataset: str
    split: str
    queries: int
    corpus: int
    k: int
    metrics: list[str]
    settings: JSONObject  # the `stress:` block as validated (`LoadSettings`)
    mode: str  # async or threads
    faults: JSONObject | None = None
    resumed: bool = False
    levels: list[LevelFigures] = field(default_factory=list)
    complete: bool = False
    warnings: list[str] = field(default_factory=list)
    case: str | None = None
    resources: dict[str, object] | None = None  # the stage figures of `studies.resources.stage`
    ingest: IngestFigures | None = None
    streaming: StreamingFigures | None = None
    requests: int = 0
    attempts: int | None = None
    failed: int = 0
    failure_rate: float = 0.0
    failures_recorded: int = 0
    first_failure: Failure | None = None
    stopped: str | None = None
    journal: JournalFigures | None = None
    exit_code: int = 0

    @property
    def allowed_failure_rate(self) -> float:
        return opt_float(self.settings.get("allowed_failure_rate")) or 0.0

    def to_dict(self) -> dict[str, object]:
        """summary.json, keys in their stated order; a section the run did not have is left out."""
        out: dict[str, object] = {k: getattr(self, k) for k in _HEAD}
        out["levels"] = [lv.to_dict() for lv in self.levels]
        if self.case is not None:
            out["case"] = self.case
        if self.resources is not None:
            out["resources"] = self.resources
        if self.ingest is not None:
            out["ingest"] = self.ingest.to_dict()
        if self.streaming is not None:
            out["streaming"] = self.streaming.to_dict()
        out["requests"] = self.requests
        if self.attempts is not None:
            out["attempts"] = self.attempts
        out["failed"] = self.failed
        out["failure_rate"] = self.failure_rate
        out["failures_recorded"] = self.failures_recorded
        out["first_failure"] = None if self.first_failure is None else self.first_failure.to_dict()
        out["stopped"] = self.stopped
        if self.journal is not None:
            out["journal"] = asdict(self.journal)
        out["exit_code"] = self.exit_code
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> StressSummary:
        faults, res, ing, st, first, journal = (
            d.get(k) for k in ("faults", "resources", "ingest", "streaming", "first_failure", "journal")
        )
        levels, warnings, metrics = d.get("levels"), d.get("warnings"), d.get("metrics")
        return cls(
            system=str(d.get("system")),
            adapter=str(d.get("adapter")),
            dataset=str(d.get("dataset")),
            split=str(d.get("split")),
            queries=opt_int(d.get("queries")) or 0,
            corpus=opt_int(d.get("corpus")) or 0,
            k=opt_int(d.get("k")) or 0,
            metrics=[str(m) for m in metrics] if isinstance(metrics, list) else [],
            settings=dict(as_object(d.get("settings"))),  # type: ignore[arg-type]
            mode=str(d.get("mode")),
            faults=dict(faults) if isinstance(faults, Mapping) else None,
            resumed=bool(d.get("resumed")),
            levels=[LevelFigures.from_dict(as_object(lv)) for lv in levels] if isinstance(levels, list) else [],
            complete=bool(d.get("complete")),
            warnings=[str(w) for w in warnings] if isinstance(warnings, list) else [],
            case=opt_str(d.get("case")),
            resources=dict(res) if isinstance(res, Mapping) else None,
            ingest=IngestFigures.from_dict(ing) if isinstance(ing, Mapping) else None,
            streaming=StreamingFigures.from_dict(st) if isinstance(st, Mapping) else None,
            requests=opt_int(d.get("requests")) or 0,
            attempts=opt_int(d.get("attempts")),
            failed=opt_int(d.get("failed")) or 0,
            failure_rate=opt_float(d.get("failure_rate")) or 0.0,
            failures_recorded=opt_int(d.get("failures_recorded")) or 0,
            first_failure=Failure(first) if isinstance(first, Mapping) else None,
            stopped=opt_str(d.get("stopped")),
            journal=JournalFigures(**journal) if isinstance(journal, Mapping) else None,  # type: ignore[arg-type]
            exit_code=opt_int(d.get("exit_code")) or 0,
        )


def write_stress(out: Path, summary: StressSummary) -> None:
    """summary.json, atomically through the one writer."""
    write_json(out / "summary.json", summary.to_dict())


def read_stress(out: Path) -> StressSummary:
    """The summary `write_stress` put in `out` (missing or malformed: an InputError naming the file)."""
    return StressSummary.from_dict(as_object(read_json(out / "summary.json")))
