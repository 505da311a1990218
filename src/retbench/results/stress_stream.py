"""What the streaming case of a stress run returns (summary.json's `streaming` block, stream_queries.jsonl).

The block is stored exactly as the case computed it (`retbench.studies.stress.streaming`); these classes read it
through typed fields, so the report (`retbench.report.stress_stream`) names no key. Latencies are milliseconds;
a filter is the share of the corpus it selects (None: unfiltered). Failure classes: error, invalid,
deleted_returned, out_of_filter, short.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retbench.io.files import iter_jsonl
from retbench.jsontypes import as_object, opt_float, opt_int
from retbench.results.stress_figures import LatencySummary

FRESHNESS_KINDS = ("insert", "update", "delete")


def _list(value: object) -> list[Mapping[str, object]]:
    return [as_object(v) for v in value] if isinstance(value, list) else []


def _int(value: object) -> int:
    return opt_int(value) or 0


def _counts(value: object) -> dict[str, int]:
    return {str(k): _int(v) for k, v in as_object(value).items()}


def _latency(value: object) -> LatencySummary:
    return LatencySummary.from_dict(as_object(value))


class _Block:
    """A stored JSON object read through typed properties; `to_dict` gives it back unchanged."""

    __slots__ = ("raw",)

    def __init__(self, raw: Mapping[str, object]) -> None:
        self.raw = raw

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.raw == self.raw  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self.raw)!r})"

    def to_dict(self) -> dict[str, object]:
        return {**self.raw}


class FilterFigures(_Block):
    """One filter's figures: at a checkpoint (matching documents, recall against the exact answer, the
    metrics against the qrels restricted to visible matching documents) or over the live queries."""

    @property
    def filter(self) -> float | None:
        return opt_float(self.raw.get("filter"))

    @property
    def recall(self) -> float | None:
        return opt_float(self.raw.get("recall"))

    @property
    def matching(self) -> int:
        return _int(self.raw.get("matching"))

    @property
    def queries(self) -> int:
        return _int(self.raw.get("queries"))

    @property
    def latency(self) -> LatencySummary:
        return _latency(self.raw.get("latency_ms"))

    @property
    def failures(self) -> dict[str, int]:
        """Failure class -> count."""
        return _counts(self.raw.get("failures"))

    @property
    def metrics(self) -> dict[str, float | None]:
        return {str(m): opt_float(v) for m, v in as_object(as_object(self.raw.get("quality")).get("metrics")).items()}

    @property
    def judged(self) -> int:
        return _int(as_object(self.raw.get("quality")).get("judged"))

    @property
    def skipped_no_relevant(self) -> int:
        return _int(as_object(self.raw.get("quality")).get("skipped_no_relevant"))


class Checkpoint(_Block):
    """Writes paused after `batches` batches: every judged query under every filter."""

    @property
    def batches(self) -> int:
        return _int(self.raw.get("batches"))

    @property
    def visible(self) -> int:
        return _int(self.raw.get("visible"))

    @property
    def filters(self) -> list[FilterFigures]:
        return [FilterFigures(r) for r in _list(self.raw.get("filters"))]


class Freshness(_Block):
    """One kind of change (insert, update, delete): how many were sampled, how many became visible (for a
    delete: were removed), the lag distribution after the write's acknowledgement."""

    @property
    def sampled(self) -> int:
        return _int(self.raw.get("sampled"))

    @property
    def seen(self) -> int:
        return _int(self.raw.get("seen", self.raw.get("removed", 0)))

    @property
    def never(self) -> int:
        return _int(self.raw.get("never_seen", self.raw.get("never_removed", 0)))

    @property
    def first_probe(self) -> int:
        return _int(self.raw.get("first_probe"))

    @property
    def lag(self) -> LatencySummary:
        return _latency(self.raw.get("lag_ms"))

    @property
    def lags_ms(self) -> list[float]:
        """Every observed lag, ascending."""
        lags = self.raw.get("lags_ms")
        return [float(x) for x in lags] if isinstance(lags, list) else []

    @property
    def indistinguishable(self) -> int:
        """Updates that cannot be told apart from their old version."""
        return _int(self.raw.get("indistinguishable"))


class StreamingFigures(_Block):
    """The streaming case: the plan, the stream's timing, the checkpoints, the live queries, freshness."""

    @property
    def k(self) -> int:
        return _int(self.raw.get("k"))

    @property
    def settings(self) -> Mapping[str, object]:
        """The `streaming:` block as validated (seed, docs_per_s, query_qps, ...)."""
        return as_object(self.raw.get("settings"))

    @property
    def plan(self) -> dict[str, int]:
        """initial, batches, inserts, updates, deletes."""
        return {k: _int(v) for k, v in as_object(self.raw.get("plan")).items() if not isinstance(v, list)}

    @property
    def stream_s(self) -> float:
        return opt_float(self.raw.get("stream_s")) or 0.0

    @property
    def docs_per_s(self) -> float | None:
        return opt_float(self.raw.get("docs_per_s"))

    @property
    def exact_sha256(self) -> str:
        return str(self.raw.get("exact_sha256"))

    @property
    def acks_s(self) -> list[float]:
        """When each written batch was acknowledged, seconds since the stream started."""
        return [opt_float(w.get("ack_s")) or 0.0 for w in _list(self.raw.get("writes"))]

    @property
    def checkpoints(self) -> list[Checkpoint]:
        return [Checkpoint(c) for c in _list(self.raw.get("checkpoints"))]

    @property
    def live(self) -> list[FilterFigures]:
        """The live queries' figures per filter."""
        return [FilterFigures(r) for r in _list(as_object(self.raw.get("live")).get("by_filter"))]

    @property
    def live_queries(self) -> int:
        return _int(as_object(self.raw.get("live")).get("queries"))

    def freshness(self, kind: str) -> Freshness:
        return Freshness(as_object(as_object(self.raw.get("freshness")).get(kind)))

    def written_share(self, t_s: float) -> float:
        """Share of the stream's batches acknowledged by `t_s` seconds after it started (the ingestion marks)."""
        return sum(a <= t_s for a in self.acks_s) / max(self.plan.get("batches", 0), 1)


@dataclass(frozen=True)
class LiveQuery:
    """One live query (a line of stream_queries.jsonl): when it was sent, under which filter, after how many
    acknowledged batches, its latency, its failure classes and its recall against the exact answer."""

    t_s: float
    qid: str
    filter: float | None
    latency_ms: float
    recall: float | None
    classes: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> LiveQuery:
        classes = d.get("classes")
        return cls(
            opt_float(d.get("t_s")) or 0.0,
            str(d.get("qid")),
            opt_float(d.get("filter")),
            opt_float(d.get("latency_ms")) or 0.0,
            opt_float(d.get("recall")),
            tuple(str(c) for c in classes) if isinstance(classes, list) else (),
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


def live_queries(rows: Sequence[Mapping[str, object]]) -> list[LiveQuery]:
    return [LiveQuery.from_dict(r) for r in rows]


def read_live_queries(path: Path) -> Iterator[LiveQuery]:
    """The live queries of stream_queries.jsonl (a malformed line: an InputError naming file and line)."""
    for _, rec in iter_jsonl(path):
        yield LiveQuery.from_dict(rec)
