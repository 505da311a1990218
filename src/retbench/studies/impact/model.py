"""What an impact study produces: one `Impact` per candidate and the weights that turn it into a gain.

Gain(d, K) = alpha * dRecall@k + beta * dContextRecall + gamma * Novelty(d, K)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from retbench.studies.impact.novelty import Novelty

MODES = ("alone", "sequential", "leave_one_out")
STATUSES = ("new", "present", "duplicate")
# registry metrics that are pure functions of the gain matrix (so changed rows can be re-scored alone)


# -- impact records ---------------------------------------------------------------------------------
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
        dr = impact.deltas.get(self.recall, 0.0)
        dc = (
            impact.d_context_recall
            if impact.d_context_recall is not None and np.isfinite(impact.d_context_recall)
            else 0.0
        )
        nov = getattr(impact.novelty, self.novelty) if impact.novelty is not None else 0.0
        impact.gain = float(self.alpha * dr + self.beta * dc + self.gamma * nov)
        return impact.gain
