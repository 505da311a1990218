"""Hybrid retrieval: fuse the rankings of any retrievers.

Two fusions, both usable on their own (`fuse_rrf`, `fuse_weighted` on rankings of one query;
`fuse_runs` on whole Runs, e.g. run files from elsewhere):

- reciprocal rank fusion: score(d) = sum_i w_i / (rrf_k + rank_i(d)), rank 1-based, rrf_k = 60
  (Cormack et al. 2009); a document a component did not return adds nothing;
- weighted fusion: each component's scores are normalized per query, then summed with weights.
  Normalizations: `minmax` ((s - min) / (max - min); all-equal scores give 1), `zscore`
  ((s - mean) / std; zero spread gives 0) and `rank` ((n - rank + 1) / n over the component's n
  returned documents). A document missing from a component gets that component's minimum
  normalized contribution for the query: 0 for minmax and rank, the lowest z-score for zscore.

Raw scores are never mixed: BM25 and cosine live on different scales. Fused rankings are ordered
by fused score, ties by doc id descending (trec_eval's rule), so the cut at k matches evaluation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data import Corpus, Run, RunBuilder
from retbench.errors import ConfigError
from retbench.retrievers.base import CapabilityError, Ranking, Retriever, create, register

FUSIONS = ("rrf", "weighted")
NORMALIZATIONS = ("minmax", "zscore", "rank")
_COMPONENT_KEYS = {"adapter", "params", "name", "depth", "weight"}
_META = "hybrid.json"


def _dedup(ranking: Sequence[tuple[str, float]], depth: int | None) -> list[tuple[str, float]]:
    """First occurrence of each doc, cut to depth (rank order as given)."""
    seen: set[str] = set()
    out: list[tuple[str, float]] = []
    for d, s in ranking:
        d = str(d)
        if d not in seen:
            seen.add(d)
            out.append((d, float(s)))
            if depth is not None and len(out) >= depth:
                break
    return out


def _per_component(value: int | float | Sequence[Any] | None, n: int, what: str) -> list[Any]:
    if value is None or isinstance(value, (int, float)):
        return [value] * n
    values = list(value)
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} entries for {n} rankings")
    return values


def _finish(scores: Mapping[str, float], k: int | None) -> Ranking:
    ranked = sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    return ranked[:k] if k is not None else ranked


def normalize_scores(scores: Sequence[float] | np.ndarray, method: str) -> np.ndarray:
    """Per-query normalization of one ranking's scores (given in rank order)."""
    s = np.asarray(scores, dtype=np.float64)
    if len(s) == 0:
        return s
    if method == "minmax":
        lo, hi = s.min(), s.max()
        return np.ones_like(s) if hi == lo else (s - lo) / (hi - lo)
    if method == "zscore":
        sd = s.std()
        return np.zeros_like(s) if sd == 0 else (s - s.mean()) / sd
    if method == "rank":
        n = len(s)
        return (n - np.arange(n, dtype=np.float64)) / n
    raise ValueError(f"unknown normalization {method!r}; expected one of {', '.join(NORMALIZATIONS)}")


def fuse_rrf(
    rankings: Sequence[Sequence[tuple[str, float]]],
    *,
    rrf_k: float = 60,
    weights: Sequence[float] | None = None,
    depth: int | Sequence[int | None] | None = None,
    k: int | None = None,
) -> Ranking:
    """Reciprocal rank fusion of one query's rankings (each in rank order)."""
    if rrf_k < 0:
        raise ValueError("rrf_k must be >= 0")
    ws = _per_component(weights if weights is not None else 1.0, len(rankings), "weights")
    depths = _per_component(depth, len(rankings), "depth")
    fused: dict[str, float] = {}
    for ranking, w, dep in zip(rankings, ws, depths, strict=True):
        for rank, (d, _) in enumerate(_dedup(ranking, dep), start=1):
            fused[d] = fused.get(d, 0.0) + float(w) / (rrf_k + rank)
    return _finish(fused, k)


def fuse_weighted(
    rankings: Sequence[Sequence[tuple[str, float]]],
    *,
    weights: Sequence[float] | None = None,
    normalization: str = "minmax",
    depth: int | Sequence[int | None] | None = None,
    k: int | None = None,
) -> Ranking:
    """Weighted sum of per-query normalized scores; see the module docstring for missing documents."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {normalization!r}; expected one of {', '.join(NORMALIZATIONS)}")
    ws = [float(w) for w in _per_component(weights if weights is not None else 1.0, len(rankings), "weights")]
    depths = _per_component(depth, len(rankings), "depth")
    parts: list[dict[str, float]] = []
    floors: list[float] = []
    for ranking, dep in zip(rankings, depths, strict=True):
        r = _dedup(ranking, dep)
        norm = normalize_scores([s for _, s in r], normalization)
        parts.append(dict(zip([d for d, _ in r], norm.tolist(), strict=True)))
        floors.append(float(norm.min()) if normalization == "zscore" and len(norm) else 0.0)
    docs = dict.fromkeys(d for p in parts for d in p)
    fused = {d: sum(w * p.get(d, floor) for p, w, floor in zip(parts, ws, floors, strict=True)) for d in docs}
    return _finish(fused, k)


def fuse(
    rankings: Sequence[Sequence[tuple[str, float]]],
    fusion: str = "rrf",
    *,
    rrf_k: float = 60,
    normalization: str = "minmax",
    weights: Sequence[float] | None = None,
    depth: int | Sequence[int | None] | None = None,
    k: int | None = None,
) -> Ranking:
    """One query's fusion by name ('rrf' or 'weighted')."""
    if fusion == "rrf":
        return fuse_rrf(rankings, rrf_k=rrf_k, weights=weights, depth=depth, k=k)
    if fusion == "weighted":
        return fuse_weighted(rankings, weights=weights, normalization=normalization, depth=depth, k=k)
    raise ValueError(f"unknown fusion {fusion!r}; expected one of {', '.join(FUSIONS)}")


def fuse_runs(runs: Sequence[Run], fusion: str = "rrf", *, name: str = "hybrid", **options: Any) -> Run:
    """Fuse whole Runs query by query (queries in first-seen order over the runs).

    A query that failed in any run is recorded as failed in the result, with the runs' errors,
    rather than fused from the survivors; a query a run lacks is fused from the runs that have it.
    """
    if not runs:
        raise ValueError("no runs to fuse")
    qids = list(dict.fromkeys(q for r in runs for q in r.query_ids))
    builder = RunBuilder(name)
    for q in qids:
        failed = [r for r in runs if q in r and r.status[q].failed]
        if failed:
            msg = "; ".join(f"{r.name or 'run'}: {r.errors.get(q, r.status[q].value)}" for r in failed)
            builder.add(q, status=failed[0].status[q], error=msg)
            continue
        builder.add(q, fuse([r.ranking(q) if q in r else [] for r in runs], fusion, **options))
    return builder.build()


@register("hybrid")
class HybridRetriever(Retriever):
    """Fuses component retrievers (each built with `create()` and searched to its own depth)."""

    adapter = "hybrid"

    def __init__(
        self,
        components: Sequence[Mapping[str, Any] | Retriever],
        fusion: str = "rrf",
        rrf_k: float = 60,
        normalization: str = "minmax",
        weights: Sequence[float] | None = None,
        depth: int | Sequence[int] = 100,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        if fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {fusion!r}; expected one of {', '.join(FUSIONS)}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"unknown normalization {normalization!r}; expected one of {', '.join(NORMALIZATIONS)}")
        if not components:
            raise ValueError("hybrid needs at least one component")
        n = len(components)
        default_w = _per_component(weights if weights is not None else 1.0, n, "weights")
        default_d = _per_component(depth, n, "depth")
        self.components: list[Retriever] = []
        self.depths: list[int] = []
        self.weights: list[float] = []
        for i, spec in enumerate(components):
            where = f"components[{i}]"
            if isinstance(spec, Retriever):
                retriever, d, w = spec, default_d[i], default_w[i]
            else:
                if not isinstance(spec, Mapping) or "adapter" not in spec:
                    raise ConfigError("each component needs an 'adapter'", field=where)
                unknown = set(spec) - _COMPONENT_KEYS
                if unknown:
                    raise ConfigError(f"unknown keys {sorted(unknown)}; valid: {sorted(_COMPONENT_KEYS)}", field=where)
                retriever = create(str(spec["adapter"]), spec.get("params") or {}, name=spec.get("name"), where=where)
                d, w = spec.get("depth", default_d[i]), spec.get("weight", default_w[i])
            if int(d) < 1:
                raise ValueError(f"{where}: depth must be positive")
            self.components.append(retriever)
            self.depths.append(int(d))
            self.weights.append(float(w))
        names = [c.name for c in self.components]
        for i, c in enumerate(self.components):
            if names.count(c.name) > 1:
                c.name = f"{c.name}-{i + 1}"  # unique names: they key save folders and descriptions
        self.fusion, self.rrf_k, self.normalization = fusion, float(rrf_k), normalization
        # an ability the hybrid has only if every component has it
        self.capabilities = frozenset.intersection(*(frozenset(c.capabilities) for c in self.components)) & {
            "add",
            "delete",
            "save",
            "load",
        }

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"adapter": self.adapter, "fusion": self.fusion}
        if self.fusion == "rrf":
            d["rrf_k"] = self.rrf_k
        else:
            d["normalization"] = self.normalization
        d["components"] = [
            {"name": c.name, "depth": dep, "weight": w, **c.describe()}
            for c, dep, w in zip(self.components, self.depths, self.weights, strict=True)
        ]
        return d

    def fingerprint(self) -> str:
        parts = [json.dumps({k: v for k, v in self.describe().items() if k != "components"}, sort_keys=True)]
        parts += [
            f"{c.name}:{c.fingerprint()}:{dep}:{w}"
            for c, dep, w in zip(self.components, self.depths, self.weights, strict=True)
        ]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]

    def index(self, corpus: Corpus) -> None:
        for c in self.components:
            c.index(corpus)

    def component_rankings(self, texts: Sequence[str]) -> list[list[Ranking]]:
        """Each component's rankings (to its own depth), component-major: [component][query]."""
        return [c.search_batch(texts, dep) for c, dep in zip(self.components, self.depths, strict=True)]

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        per = self.component_rankings(texts)
        return [
            fuse(
                [per[c][q] for c in range(len(per))],
                self.fusion,
                rrf_k=self.rrf_k,
                normalization=self.normalization,
                weights=self.weights,
                k=k,
            )
            for q in range(len(texts))
        ]

    def _need(self, ability: str) -> None:
        if ability not in self.capabilities:
            lacking = [c.name for c in self.components if ability not in c.capabilities]
            raise CapabilityError(f"hybrid {self.name!r} cannot {ability}: component(s) {', '.join(lacking)} cannot")

    def add(self, corpus: Corpus) -> None:
        self._need("add")
        for c in self.components:
            c.add(corpus)

    def delete(self, ids: Sequence[str]) -> None:
        self._need("delete")
        for c in self.components:
            c.delete(ids)

    def save(self, path: str | Path) -> None:
        """One subfolder per component (by name) plus hybrid.json."""
        self._need("save")
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        for c in self.components:
            c.save(folder / c.name)
        (folder / _META).write_text(json.dumps(self.describe(), indent=1), encoding="utf-8")

    def load(self, path: str | Path) -> None:
        self._need("load")
        folder = Path(path)
        for c in self.components:
            c.load(folder / c.name)

    def close(self) -> None:
        for c in self.components:
            c.close()


__all__ = [
    "FUSIONS",
    "NORMALIZATIONS",
    "HybridRetriever",
    "fuse",
    "fuse_rrf",
    "fuse_runs",
    "fuse_weighted",
    "normalize_scores",
]
