"""Figures both stress cases share: latency percentiles and one failed attempt as it was journaled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from retbench.jsontypes import JSONObject, opt_float, opt_int, opt_str


@dataclass(frozen=True)
class LatencySummary:
    """p50/p95/p99/max/mean in milliseconds (NumPy's linear-interpolation percentiles) over n values; None
    where there is no value."""

    n: int = 0
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    mean: float | None = None

    @classmethod
    def of_seconds(cls, values_s: Sequence[float]) -> LatencySummary:
        """The summary of durations given in seconds."""
        if not values_s:
            return cls()
        a = np.asarray(values_s, dtype=np.float64) * 1000.0
        p50, p95, p99 = np.percentile(a, [50, 95, 99])
        return cls(len(a), float(p50), float(p95), float(p99), float(a.max()), float(a.mean()))

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> LatencySummary:
        return cls(
            opt_int(d.get("n")) or 0,
            *(opt_float(d.get(k)) for k in ("p50", "p95", "p99", "max", "mean")),  # type: ignore[arg-type]
        )


class Failure:
    """One failed attempt exactly as it was journaled (failures.jsonl), read through typed fields.

    Where it happened differs by phase: a query of a concurrency level (qid, level, attempt; `warmup` or
    `measure`), an ingest batch (batch, docs), or in the streaming case a live or checkpoint query, a freshness
    probe or a write (batches or batch, filter). The record keeps its own keys and their order.
    """

    __slots__ = ("record",)

    def __init__(self, record: Mapping[str, object]) -> None:
        self.record: JSONObject = dict(record)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Failure) and other.record == self.record

    def __repr__(self) -> str:
        return f"Failure({self.record!r})"

    def to_dict(self) -> dict[str, object]:
        return {**self.record}

    @property
    def phase(self) -> str | None:
        """warmup, measure, ingest; live, checkpoint, probe, write (the streaming case)."""
        return opt_str(self.record.get("phase"))

    @property
    def qid(self) -> str | None:
        return opt_str(self.record.get("qid"))

    @property
    def kind(self) -> str | None:
        """error, timeout, invalid (a stress level); a failure class (the streaming case)."""
        return opt_str(self.record.get("kind"))

    @property
    def detail(self) -> str | None:
        return opt_str(self.record.get("detail"))

    @property
    def exc_type(self) -> str | None:
        return opt_str(self.record.get("exc_type"))

    @property
    def message(self) -> str | None:
        """The backend's message, verbatim."""
        return opt_str(self.record.get("message"))

    @property
    def attempt(self) -> int | None:
        return opt_int(self.record.get("attempt"))

    @property
    def level(self) -> int | None:
        return opt_int(self.record.get("level"))

    @property
    def batch(self) -> int | None:
        return opt_int(self.record.get("batch"))

    @property
    def batches(self) -> int | None:
        """Stream batches acknowledged when it happened (a write's failure names its `batch` instead)."""
        return opt_int(self.record.get("batches", self.record.get("batch")))

    @property
    def docs(self) -> tuple[int, int] | None:
        """The ingest batch's documents, [start, end)."""
        d = self.record.get("docs")
        if not isinstance(d, Sequence) or len(d) != 2:
            return None
        start, end = opt_int(d[0]), opt_int(d[1])
        return None if start is None or end is None else (start, end)

    @property
    def filter(self) -> float | None:
        """The filter's selectivity (None: unfiltered, or no filter applies)."""
        return opt_float(self.record.get("filter"))
