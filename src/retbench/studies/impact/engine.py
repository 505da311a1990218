"""What both impact engines share: evaluation queries, parsed rank metrics, per-candidate aggregation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from retbench.data import Qrels
from retbench.errors import ConfigError, InputError
from retbench.metrics.base import MetricContext
from retbench.metrics.judges import GainMatrix
from retbench.metrics.registry import MetricSpec, parse_metrics
from retbench.results.impact import Impact
from retbench.studies.impact.support import ContextRecall

RANK_METRICS = frozenset({"hit", "recall", "P", "f1", "mrr", "map", "ndcg", "ndcg_exp", "hybrid"})
TIE_MARGIN = 8  # extra neighbours fetched so a tie straddling the cut is seen and resolved


def rank_specs(metrics: Sequence[str], *, field_name: str = "metrics") -> list[MetricSpec]:
    """Parse metric names for ingestion: rank metrics of the gain matrix, each with a cutoff (@k)."""
    specs = parse_metrics(list(metrics))
    if not specs:
        raise ConfigError("list at least one metric", field=field_name)
    for s in specs:
        if s.metric.name not in RANK_METRICS:
            raise ConfigError(
                f"metric {s.name!r} is not a rank metric of the gain matrix; use {', '.join(sorted(RANK_METRICS))}",
                field=field_name,
            )
        if s.k is None:
            raise ConfigError(
                f"metric {s.name!r} needs a cutoff here (e.g. {s.metric.name}@10): only top-k lists are kept",
                field=field_name,
            )
    return specs


def pair_gain_matrix(base: GainMatrix, rows: np.ndarray, gains: np.ndarray, lengths: np.ndarray) -> GainMatrix:
    """Gain matrix whose row i is base query rows[i] with new grades by rank `gains[i]`; ideal grades unchanged."""
    offs = base.ideal_offsets
    counts = offs[rows + 1] - offs[rows]
    new_offs = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=new_offs[1:])
    idx = np.repeat(offs[rows] - new_offs[:-1], counts) + np.arange(new_offs[-1], dtype=np.int64)
    hr, hk = np.nonzero(gains > 0)
    qids = [base.query_ids[r] for r in rows.tolist()]
    return GainMatrix.from_hits(qids, hr, hk, gains[hr, hk], lengths, new_offs, base.ideal_grades[idx])


class _Base:
    """What both engines share: evaluation queries, metrics, per-candidate aggregation."""

    def __init__(
        self,
        query_ids: Sequence[str],
        qrels: Qrels | Mapping[str, Mapping[str, int]],
        metrics: Sequence[str],
        relevance_level: int,
        context: ContextRecall | None,
        affected_by: str | None,
    ) -> None:
        self.specs = rank_specs(metrics)
        self.metric_names = [s.name for s in self.specs]
        self.level = int(relevance_level)
        self.qrels = qrels
        have = set(query_ids)
        judged = [q for q in qrels if q in have]
        # trec_eval's default: queries with no relevant document are skipped (and listed)
        self.qids = [q for q in judged if any(g >= self.level for g in qrels[q].values())]
        self.skipped = [q for q in judged if q not in set(self.qids)]
        if not self.qids:
            raise InputError("no evaluation query has a relevant document", field="qrels")
        self.row_of = {q: i for i, q in enumerate(self.qids)}
        self.n = len(self.qids)
        self.context = context
        self.context_k = context.context_k if context is not None else 0
        self.depth = max([s.k for s in self.specs if s.k is not None] + [self.context_k])
        self.width = self.depth + 1
        self.has_ref = np.array([context is not None and context.has(q) for q in self.qids], dtype=bool)
        names = self.metric_names
        if affected_by is None:
            affected_by = next((m for m in names if m.startswith("ndcg")), names[0])
        else:
            affected_by = parse_metrics([affected_by])[0].name
        if affected_by not in names:
            raise ConfigError(
                f"affected_by {affected_by!r} is not one of the metrics ({', '.join(names)})", field="affected_by"
            )
        self.affected = names.index(affected_by)
        # doc id -> [(row, grade)] of the evaluation queries that judge it relevant (own queries)
        self.judged_for: dict[str, list[tuple[int, float]]] = {}
        for i, q in enumerate(self.qids):
            for d, g in qrels[q].items():
                if g >= self.level:
                    self.judged_for.setdefault(d, []).append((i, float(g)))

    def _values(self, gm: GainMatrix) -> np.ndarray:
        ctx = MetricContext(gm, self.level)
        return np.column_stack([s.compute(ctx) for s in self.specs]) if len(gm) else np.zeros((0, len(self.specs)))

    def _collect(
        self,
        mode: str,
        ids: Sequence[str],
        qi: np.ndarray,
        ci: np.ndarray,
        delta: np.ndarray,
        dcr: np.ndarray,
        changed: np.ndarray,
    ) -> list[Impact]:
        """Per-candidate impacts from per-(query, candidate) deltas of the pairs that changed."""
        m = len(ids)
        sums = (
            np.stack([np.bincount(ci, weights=delta[:, j], minlength=m) for j in range(len(self.specs))], axis=1)
            / self.n
        )
        n_ref = int(self.has_ref.sum())
        ok = np.isfinite(dcr)
        cr = np.bincount(ci[ok], weights=dcr[ok], minlength=m) / n_ref if n_ref else None
        order = np.lexsort((qi, ci))
        qi, ci, delta, changed = qi[order], ci[order], delta[order], changed[order]
        bounds = np.searchsorted(ci, np.arange(m + 1))
        out = []
        for c, doc in enumerate(ids):
            a, b = bounds[c], bounds[c + 1]
            rows, d = qi[a:b], delta[a:b]
            eff = d[:, self.affected]
            imp = Impact(doc, mode)
            imp.deltas = {name: float(sums[c, j]) for j, name in enumerate(self.metric_names)}
            imp.d_context_recall = float(cr[c]) if cr is not None else None
            imp.changed = [self.qids[r] for r in rows[changed[a:b]].tolist()]
            imp.gained = [self.qids[r] for r in rows[eff > 0].tolist()]
            imp.lost = [self.qids[r] for r in rows[eff < 0].tolist()]
            own = self.judged_for.get(doc, [])
            if own:
                own_rows = np.array([r for r, _ in own], dtype=np.int64)
                hit = np.isin(rows, own_rows)
                imp.own_queries = [self.qids[r] for r in own_rows.tolist()]
                imp.own_deltas = {
                    name: float(d[hit, j].sum() / len(own_rows)) for j, name in enumerate(self.metric_names)
                }
            out.append(imp)
        return out

    def _cat(self, parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        if not parts:
            m = len(self.specs)
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, m)), np.zeros(0), np.zeros(0, bool)
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(5))

    def _grades(self, rows: np.ndarray, doc_ids: Sequence[str]) -> np.ndarray:
        out = np.zeros(len(rows), dtype=np.float64)
        for i, (r, d) in enumerate(zip(rows.tolist(), doc_ids, strict=True)):
            g = self.qrels[self.qids[r]].get(d, 0)
            out[i] = g if g > 0 else 0.0
        return out


# -- the exact incremental engine (dense, flat inner product) -----------------------------------------
