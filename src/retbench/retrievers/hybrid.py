"""Hybrid retrieval: fuse the rankings of any retrievers.

The fusion methods (`retrievers/fusion.py`: reciprocal rank fusion, retbench's weighted fusion and every
unsupervised method of `ranx.fuse` with its normalisations, formulas in that module's docstring) work on
one query's rankings; `fuse_runs` applies one to whole Runs (e.g. run files from elsewhere), and
`HybridRetriever` searches its component retrievers and fuses their rankings per query.

Raw scores are never mixed unless asked for (`normalization: none`): BM25 and cosine live on different scales.
Fused rankings are ordered by fused score, ties by doc id descending (trec_eval's rule), so the cut at k matches
evaluation. Each component's search and the fusion are timed inside the hybrid's own search (`parts`), so the
hybrid's query latency holds its components' (reports show the breakdown); a dense component whose query
vectors an earlier system encoded reads them from the embedding cache, which the report says beside it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from retbench.data import Corpus, Run, RunBuilder
from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import CapabilityError, PartTimes, Retriever, check_system, create, register
from retbench.retrievers.fusion import Ranking, fuse, per_system
from retbench.retrievers.fusion_options import (
    METHOD_PARAMS,
    RANK_BASED,
    canonical_fusion,
    canonical_normalization,
    fusion_problem,
    method_param,
)

_COMPONENT_KEYS = {"adapter", "params", "name", "depth", "weight"}
_META = "hybrid.json"


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
    parts: PartTimes

    @staticmethod
    def check_config(params: Mapping[str, object]) -> None:
        """The fusion options (`fusion_options.fusion_problem`: method, normalization, weights, rrf_k, param) with each
        component's own `weight` and `depth`, checked when a config loads (`retrievers.base.check_system`) and
        again when one is built, so a bad option is refused before any system runs, not by every query."""
        components = params.get("components")
        specs = list(components) if isinstance(components, (list, tuple)) else []
        weights = params.get("weights")
        given = list(weights) if isinstance(weights, (list, tuple)) else None
        if any(isinstance(c, Mapping) and "weight" in c for c in specs) and (given is None or len(given) == len(specs)):
            fallback = given if given is not None else [1.0 if weights is None else weights] * len(specs)
            # a component's own weight overrides the list's
            weights = [
                c.get("weight", w) if isinstance(c, Mapping) else w for c, w in zip(specs, fallback, strict=True)
            ]
        problem = fusion_problem(
            params.get("fusion", "rrf"),
            weights=weights,
            rrf_k=params.get("rrf_k", 60),
            normalization=params.get("normalization", "minmax"),
            param=params.get("param"),
            n=len(specs) or None,
        )
        if problem:
            fld, reason = problem
            at = int(fld[len("weights[") : -1]) if fld.startswith("weights[") else None
            if at is not None and isinstance(specs[at], Mapping) and "weight" in specs[at]:
                fld = f"components[{at}].weight"
            raise ConfigError(reason, field=f"params.{fld}")
        for i, c in enumerate(specs):
            if isinstance(c, Mapping) and isinstance(c.get("adapter"), str):  # each component's own parameters
                check_system(c["adapter"], c.get("params") or {}, None, f"params.components[{i}]")
            depth = c.get("depth") if isinstance(c, Mapping) else None
            if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
                raise ConfigError(
                    f"depth must be a whole number >= 1, got {depth!r}", field=f"params.components[{i}].depth"
                )

    def __init__(
        self,
        components: Sequence[Mapping[str, Any] | Retriever],
        fusion: str = "rrf",
        rrf_k: float = 60,
        normalization: str = "minmax",
        weights: Sequence[float] | None = None,
        depth: int | Sequence[int] = 100,
        name: str | None = None,
        param: float | None = None,
    ) -> None:
        """`fusion` is any method of `retrievers/fusion.py` (ranx's names too); `param` its gamma, sigma or phi."""
        super().__init__(name)
        options = {"fusion": fusion, "rrf_k": rrf_k, "normalization": normalization, "weights": weights, "param": param}
        self.check_config({"components": list(components), **options})  # built retrievers are taken as they are
        fusion = canonical_fusion(fusion)
        normalization = canonical_normalization(normalization)
        self.param = method_param(fusion, param) if fusion in METHOD_PARAMS else None
        if not components:
            raise ValueError("hybrid needs at least one component")
        n = len(components)
        default_w = per_system(weights if weights is not None else 1.0, n, "weights")
        default_d = per_system(depth, n, "depth")
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
        self.parts = PartTimes()  # each component's search and the fusion, inside the queries' latencies
        # an ability the hybrid has only if every component has it
        self.capabilities = frozenset.intersection(*(frozenset(c.capabilities) for c in self.components)) & {
            "add",
            "delete",
            "save",
            "load",
        }

    def describe(self) -> JSONObject:
        d: JSONObject = {"adapter": self.adapter, "fusion": self.fusion}
        if self.fusion == "rrf":
            d["rrf_k"] = self.rrf_k
        elif self.fusion not in RANK_BASED:
            d["normalization"] = self.normalization
        if self.param is not None:
            d[METHOD_PARAMS[self.fusion][0]] = self.param
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
        """Each component's rankings (to its own depth), component-major: [component][query]; each component's
        seconds go to `parts` (the breakdown of the hybrid's latency)."""
        out = []
        for c, dep in zip(self.components, self.depths, strict=True):
            t0 = time.perf_counter()
            out.append(c.search_batch(texts, dep))
            self.parts.add(f"component {c.name}", time.perf_counter() - t0, len(texts))
        return out

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        per = self.component_rankings(texts)
        t0 = time.perf_counter()
        fused = [
            fuse(
                [per[c][q] for c in range(len(per))],
                self.fusion,
                rrf_k=self.rrf_k,
                normalization=self.normalization,
                weights=self.weights,
                k=k,
                param=self.param,
            )
            for q in range(len(texts))
        ]
        self.parts.add("fusion", time.perf_counter() - t0, len(texts))
        return fused

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


__all__ = ["HybridRetriever", "fuse_runs"]
