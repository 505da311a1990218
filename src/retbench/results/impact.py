"""What an ingestion-impact study returns: one `Impact` per candidate, the gain weights, and the study's result.

    Novelty(d, K) = 1 - max_{c in chunks(d), c' in chunks(K)} cos(c, c')   (min and mean over d's chunks)
    Gain(d, K)    = alpha * dRecall@k + beta * dContextRecall + gamma * Novelty(d, K)

The study (`retbench.studies.impact`) computes these records; the report (`retbench.report.impact`) formats an
`ImpactResult` and nothing else, so it never needs the study's code or its config.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MODES = ("alone", "sequential", "leave_one_out")
STATUSES = ("new", "present", "duplicate")


@dataclass
class Novelty:
    """How new a document is: per chunk 1 - best cosine to K's chunks, aggregated by min and mean."""

    min: float
    mean: float
    max_cos: float
    nearest_doc: str | None
    nearest_chunk: str | None
    chunks: list[dict[str, object]] = field(default_factory=list)


@dataclass
class Impact:
    """What one candidate changes (or, in leave-one-out, what one present document contributes)."""

    doc_id: str
    mode: str
    group: str = ""
    status: str = "new"
    duplicate_of: str | None = None
    deltas: dict[str, float] = field(default_factory=dict)
    d_context_recall: float | None = None
    own_queries: list[str] = field(default_factory=list)
    own_deltas: dict[str, float] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    gained: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    novelty: Novelty | None = None
    gain: float = 0.0
    after: dict[str, float] | None = None  # sequential: metric means once this document is in

    def to_dict(self, *, chunks: bool = True) -> dict[str, object]:
        out = asdict(self)
        if self.novelty is not None and not chunks:
            out["novelty"].pop("chunks", None)
        return out


@dataclass
class GainWeights:
    """Gain = alpha * d<recall metric> + beta * dContextRecall + gamma * Novelty(min or mean)."""

    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 0.01
    recall: str = ""
    novelty: str = "min"

    def apply(self, impact: Impact) -> float:
        """Set and return the impact's gain (a missing context-recall delta counts 0, as does missing novelty)."""
        dr = impact.deltas.get(self.recall, 0.0)
        dc = impact.d_context_recall
        dc = dc if dc is not None and math.isfinite(dc) else 0.0
        nov = getattr(impact.novelty, self.novelty) if impact.novelty is not None else 0.0
        impact.gain = float(self.alpha * dr + self.beta * dc + self.gamma * nov)
        return impact.gain


@dataclass
class ImpactResult:
    """An ingestion-impact study as it ran: the metrics before any candidate, each mode's impacts (best first
    for alone and leave-one-out, in order for sequential), the summary and the manifest it wrote."""

    name: str
    metrics: list[str]
    before: dict[str, float]
    results: dict[str, list[Impact]]
    summary: dict[str, Any]
    manifest: dict[str, Any]
    gain: GainWeights
    sequential_order: str = "given"  # the order the sequential mode added candidates in (given, or gain)
    root: Path | None = None


@dataclass(frozen=True)
class GroupImpact:
    """The candidates of one group (alone mode): how many, their mean gain, mean minimum novelty (over those with
    a novelty) and mean change of each metric, and how many changed any query's results."""

    group: str
    n: int
    mean_gain: float
    mean_novelty_min: float
    mean_deltas: dict[str, float]
    changed: int


def impact_by_group(alone: Sequence[Impact], metrics: Sequence[str]) -> list[GroupImpact]:
    """Per group, in the order groups first appear; NaN where a group has no value to average."""
    out = []
    for grp in dict.fromkeys(i.group for i in alone):
        v = [i for i in alone if i.group == grp]
        novelty = [i.novelty.min for i in v if i.novelty]
        out.append(
            GroupImpact(
                grp,
                len(v),
                float(np.mean([i.gain for i in v])),
                float(np.mean(novelty)) if novelty else math.nan,
                {m: float(np.mean([i.deltas[m] for i in v])) for m in metrics},
                sum(bool(i.changed) for i in v),
            )
        )
    return out
