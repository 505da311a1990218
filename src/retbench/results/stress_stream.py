"""What the streaming case of a stress run returns (summary.json's `streaming` block, stream_queries.jsonl).

The study (`retbench.studies.stress.streaming`) builds these objects and the report
(`retbench.report.stress_stream`) reads them, so neither names a key. `to_dict` writes each object in the key
order summary.json has always had, and `from_dict` reads it back, so a file read and written again is the same
byte for byte. Latencies are milliseconds; a filter is the share of the corpus it selects (None: unfiltered).
Failure classes: error, invalid, deleted_returned, out_of_filter, short.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retbench.io.files import iter_jsonl
from retbench.jsontypes import as_object, counts, opt_float, opt_int
from retbench.results.stress_figures import LatencySummary

FRESHNESS_KINDS = ("insert", "update", "delete")


def _list(value: object) -> list[Mapping[str, object]]:
    return [as_object(v) for v in value] if isinstance(value, list) else []


def _int(value: object) -> int:
    return opt_int(value) or 0


def _float(value: object) -> float:
    return opt_float(value) or 0.0


def _latency(value: object) -> LatencySummary:
    return LatencySummary.from_dict(as_object(value))


@dataclass(frozen=True)
class Quality:
    """The config's metrics at a checkpoint, against the qrels restricted to the visible documents that pass
    the filter; queries left with no relevant document are skipped, not scored."""

    judged: int = 0
    skipped_no_relevant: int = 0
    metrics: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"judged": self.judged, "skipped_no_relevant": self.skipped_no_relevant, "metrics": dict(self.metrics)}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Quality:
        metrics = {str(m): opt_float(v) for m, v in as_object(d.get("metrics")).items()}
        return cls(_int(d.get("judged")), _int(d.get("skipped_no_relevant")), metrics)


@dataclass(frozen=True)
class FilterFigures:
    """One filter's figures: at a checkpoint (matching documents, recall over `recall_n` queries against the
    exact answer, `quality`) or over the live queries (`queries` sent; no `quality`). Failures: class -> count."""

    filter: float | None
    recall: float | None
    latency: LatencySummary
    failures: dict[str, int]
    matching: int = 0
    recall_n: int = 0
    quality: Quality | None = None  # set at a checkpoint, None over the live queries
    queries: int = 0

    @property
    def metrics(self) -> dict[str, float | None]:
        return self.quality.metrics if self.quality is not None else {}

    @property
    def judged(self) -> int:
        return self.quality.judged if self.quality is not None else 0

    @property
    def skipped_no_relevant(self) -> int:
        return self.quality.skipped_no_relevant if self.quality is not None else 0

    def to_dict(self) -> dict[str, object]:
        lat, fails = self.latency.to_dict(), dict(self.failures)
        if self.quality is None:
            return {
                "filter": self.filter,
                "queries": self.queries,
                "recall": self.recall,
                "latency_ms": lat,
                "failures": fails,
            }
        return {
            "filter": self.filter,
            "matching": self.matching,
            "recall": self.recall,
            "recall_n": self.recall_n,
            "failures": fails,
            "latency_ms": lat,
            "quality": self.quality.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> FilterFigures:
        q = d.get("quality")
        return cls(
            opt_float(d.get("filter")),
            opt_float(d.get("recall")),
            _latency(d.get("latency_ms")),
            counts(d.get("failures")),
            matching=_int(d.get("matching")),
            recall_n=_int(d.get("recall_n")),
            quality=Quality.from_dict(q) if isinstance(q, Mapping) else None,
            queries=_int(d.get("queries")),
        )


@dataclass(frozen=True)
class Checkpoint:
    """Writes paused after `batches` batches (started `t_s` seconds into the stream): every judged query under
    every filter; `exact_sha256` fingerprints the exact answers, the same on every re-run."""

    batches: int
    t_s: float
    visible: int
    exact_sha256: str
    filters: tuple[FilterFigures, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "batches": self.batches,
            "t_s": self.t_s,
            "visible": self.visible,
            "exact_sha256": self.exact_sha256,
            "filters": [f.to_dict() for f in self.filters],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Checkpoint:
        return cls(
            _int(d.get("batches")),
            _float(d.get("t_s")),
            _int(d.get("visible")),
            str(d.get("exact_sha256")),
            tuple(FilterFigures.from_dict(r) for r in _list(d.get("filters"))),
        )


@dataclass(frozen=True)
class Freshness:
    """One kind of change (insert, update, delete): how many were sampled, how many became visible (for a
    delete: were removed; stored as `removed`/`never_removed`), how many on the first probe round, the lag
    distribution after the write's acknowledgement and every observed lag (ascending)."""

    sampled: int = 0
    seen: int = 0
    never: int = 0
    lag: LatencySummary = field(default_factory=LatencySummary)
    first_probe: int = 0
    lags_ms: tuple[float, ...] = ()
    removal: bool = False  # a delete: `seen` means removed
    indistinguishable: int | None = None  # updates only: those that cannot be told apart from their old version

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "sampled": self.sampled,
            ("removed" if self.removal else "seen"): self.seen,
            ("never_removed" if self.removal else "never_seen"): self.never,
            "lag_ms": self.lag.to_dict(),
            "first_probe": self.first_probe,
            "lags_ms": list(self.lags_ms),
        }
        if self.indistinguishable is not None:
            out["indistinguishable"] = self.indistinguishable
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Freshness:
        removal = "removed" in d
        lags = d.get("lags_ms")
        return cls(
            _int(d.get("sampled")),
            _int(d.get("removed" if removal else "seen")),
            _int(d.get("never_removed" if removal else "never_seen")),
            _latency(d.get("lag_ms")),
            _int(d.get("first_probe")),
            tuple(_float(x) for x in lags) if isinstance(lags, list) else (),
            removal,
            opt_int(d.get("indistinguishable")),
        )


@dataclass(frozen=True)
class Write:
    """One batch of the stream: when its first write was sent and its last acknowledged (seconds since the
    stream started), and how many documents it changed."""

    batch: int
    t_s: float
    ack_s: float
    docs: int

    def to_dict(self) -> dict[str, object]:
        return {"batch": self.batch, "t_s": self.t_s, "ack_s": self.ack_s, "docs": self.docs}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Write:
        return cls(_int(d.get("batch")), _float(d.get("t_s")), _float(d.get("ack_s")), _int(d.get("docs")))


@dataclass(frozen=True)
class LiveFigures:
    """The live queries: how many, failures by class, latency, and the same per filter."""

    queries: int
    failures: dict[str, int]
    latency: LatencySummary
    by_filter: tuple[FilterFigures, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "queries": self.queries,
            "failures": dict(self.failures),
            "latency_ms": self.latency.to_dict(),
            "by_filter": [f.to_dict() for f in self.by_filter],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> LiveFigures:
        return cls(
            _int(d.get("queries")),
            counts(d.get("failures")),
            _latency(d.get("latency_ms")),
            tuple(FilterFigures.from_dict(r) for r in _list(d.get("by_filter"))),
        )


@dataclass(frozen=True)
class StreamingFigures:
    """The streaming case: the settings and plan, the stream's timing, the checkpoints, the live queries,
    freshness and failure counts by class. `settings` is the `streaming:` block as validated (seed, docs_per_s,
    query_qps, ...); `plan` counts initial, batches, inserts, updates, deletes; `docs_per_s` is inserts over
    the writing time (checkpoint pauses left out; None when nothing was written)."""

    settings: dict[str, object]
    plan: dict[str, int]
    checkpoints_after_batch: tuple[int, ...]
    corpus: int
    queries: int
    k: int
    index_initial_s: float
    stream_s: float
    write_pause_s: float
    docs_per_s: float | None
    writes: tuple[Write, ...]
    checkpoints: tuple[Checkpoint, ...]
    exact_sha256: str
    live: LiveFigures
    freshness_by_kind: dict[str, Freshness]
    failure_counts: dict[str, int]

    @property
    def acks_s(self) -> list[float]:
        """When each written batch was acknowledged, seconds since the stream started."""
        return [w.ack_s for w in self.writes]

    @property
    def live_queries(self) -> int:
        return self.live.queries

    def freshness(self, kind: str) -> Freshness:
        return self.freshness_by_kind.get(kind, Freshness(removal=kind == "delete"))

    def written_share(self, t_s: float) -> float:
        """Share of the stream's batches acknowledged by `t_s` seconds after it started (the ingestion marks)."""
        return sum(a <= t_s for a in self.acks_s) / max(self.plan.get("batches", 0), 1)

    def to_dict(self) -> dict[str, object]:
        return {
            "settings": dict(self.settings),
            "plan": {**self.plan, "checkpoints_after_batch": list(self.checkpoints_after_batch)},
            "corpus": self.corpus,
            "queries": self.queries,
            "k": self.k,
            "index_initial_s": self.index_initial_s,
            "stream_s": self.stream_s,
            "write_pause_s": self.write_pause_s,
            "docs_per_s": self.docs_per_s,
            "writes": [w.to_dict() for w in self.writes],
            "checkpoints": [c.to_dict() for c in self.checkpoints],
            "exact_sha256": self.exact_sha256,
            "live": self.live.to_dict(),
            "freshness": {kind: f.to_dict() for kind, f in self.freshness_by_kind.items()},
            "failure_counts": dict(self.failure_counts),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> StreamingFigures:
        plan = as_object(d.get("plan"))
        after = plan.get("checkpoints_after_batch")
        return cls(
            dict(as_object(d.get("settings"))),
            {str(k): _int(v) for k, v in plan.items() if k != "checkpoints_after_batch"},
            tuple(_int(b) for b in after) if isinstance(after, list) else (),
            _int(d.get("corpus")),
            _int(d.get("queries")),
            _int(d.get("k")),
            _float(d.get("index_initial_s")),
            _float(d.get("stream_s")),
            _float(d.get("write_pause_s")),
            opt_float(d.get("docs_per_s")),
            tuple(Write.from_dict(w) for w in _list(d.get("writes"))),
            tuple(Checkpoint.from_dict(c) for c in _list(d.get("checkpoints"))),
            str(d.get("exact_sha256")),
            LiveFigures.from_dict(as_object(d.get("live"))),
            {str(k): Freshness.from_dict(as_object(v)) for k, v in as_object(d.get("freshness")).items()},
            counts(d.get("failure_counts")),
        )


@dataclass(frozen=True)
class LiveQuery:
    """One live query (a line of stream_queries.jsonl): when it was sent, under which filter, after how many
    acknowledged batches (and single writes: three a batch), its latency, its failure classes and its recall
    against the exact answer; `states` is how many visible states it could have seen (None: the call failed)."""

    t_s: float
    qid: str
    filter: float | None
    latency_ms: float
    recall: float | None
    classes: tuple[str, ...] = ()
    acked: int = 0
    writes: int = 0
    states: int | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "t_s": self.t_s,
            "qid": self.qid,
            "filter": self.filter,
            "acked": self.acked,
            "writes": self.writes,
            "latency_ms": self.latency_ms,
            "classes": list(self.classes),
            "recall": self.recall,
        }
        if self.states is not None:
            out["states"] = self.states
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> LiveQuery:
        classes = d.get("classes")
        return cls(
            _float(d.get("t_s")),
            str(d.get("qid")),
            opt_float(d.get("filter")),
            _float(d.get("latency_ms")),
            opt_float(d.get("recall")),
            tuple(str(c) for c in classes) if isinstance(classes, list) else (),
            _int(d.get("acked")),
            _int(d.get("writes")),
            opt_int(d.get("states")),
        )


@dataclass(frozen=True)
class LiveWindow:
    """The live queries sent in one window of the stream, [index * width_s, (index + 1) * width_s)."""

    index: int
    width_s: float
    queries: tuple[LiveQuery, ...]

    @property
    def mid_s(self) -> float:
        return self.index * self.width_s + self.width_s / 2

    def recall(self, selectivity: float | None) -> float | None:
        """Mean recall of the window's queries under that filter (None: none of them has a recall)."""
        vals = [q.recall for q in self.queries if q.filter == selectivity and q.recall is not None]
        return float(np.mean(vals)) if vals else None

    def latency_ms(self, percentile: float) -> float:
        """A latency percentile of the window's queries (NumPy's linear interpolation)."""
        return float(np.percentile([q.latency_ms for q in self.queries], percentile))


def live_windows(rows: Sequence[LiveQuery], width_s: float = 1.0) -> list[LiveWindow]:
    """The live queries in windows of `width_s` seconds by send time, earliest first (empty windows left out)."""
    out: dict[int, list[LiveQuery]] = {}
    for r in rows:
        out.setdefault(int(r.t_s // width_s), []).append(r)
    return [LiveWindow(i, width_s, tuple(qs)) for i, qs in sorted(out.items())]


def read_live_queries(path: Path) -> Iterator[LiveQuery]:
    """The live queries of stream_queries.jsonl (a malformed line: an InputError naming file and line)."""
    for _, rec in iter_jsonl(path):
        yield LiveQuery.from_dict(rec)
