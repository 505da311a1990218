"""A results directory read back: systems, their evaluations, runs and the manifest."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from retbench.data import Run
from retbench.errors import InputError
from retbench.evaluation import Evaluation
from retbench.io.beir import read_queries
from retbench.io.datasets import resolve
from retbench.io.files import find_variant, load_yaml_text
from retbench.results.files import load_run, read_json
from retbench.results.layout import SystemDir


@dataclass
class Results:
    """A results directory read back: systems, their evaluations, runs, and the manifest."""

    root: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    metrics_json: dict[str, Any] = field(default_factory=dict)

    @property
    def systems(self) -> list[str]:
        return list(self.metrics_json)

    def system_dir(self, system: str) -> SystemDir:
        return SystemDir.of(self.root, system)

    def evaluation(self, system: str) -> Evaluation:
        """The system's per-query table, carrying the coverage stored in metrics.json."""
        self._check(system)
        ev = Evaluation.from_tsv(self.system_dir(system).per_query)
        ev.coverage = self.coverage(system)
        return ev

    def run(self, system: str) -> Run:
        self._check(system)
        return load_run(self.system_dir(system), name=system)

    def latencies(self, system: str) -> dict[str, float]:
        return self.run(system).latency

    def coverage(self, system: str) -> dict[str, Any]:
        """The cell's coverage as the runner stored it in metrics.json (answered/judged/failed/missing/scored)."""
        self._check(system)
        entry = self.metrics_json.get(system) or {}
        return dict(entry.get("coverage") or {}) if isinstance(entry, Mapping) else {}

    def depth(self, system: str, run: Run | None = None) -> int:
        """How deep the system searched: the depth its cell recorded beside its coverage, else the
        config's `depth`, else its longest ranking (a config without `depth` used the study's default)."""
        return recorded_depth(self.coverage(system)) or config_depth(self.manifest) or (run or self.run(system)).depth

    def aggregates(self, system: str) -> dict[str, Any]:
        """A system's aggregates.json, held to metrics.json: each mean there is the one its interval was computed
        with, so no interval is ever shown beside another number (a NaN mean beside a finite interval came from
        files edited, or mixed from two runs; it is refused naming the metric)."""
        self._check(system)
        path = self.system_dir(system).aggregates
        agg = read_json(path)
        stored = self.metrics_json[system]
        for m, a in agg.items() if isinstance(agg, dict) and isinstance(stored, dict) else ():
            if isinstance(a, dict) and m in stored and not _same_number(a.get("mean"), stored[m]):
                raise InputError(
                    f"mean {a.get('mean')!r} here but {stored[m]!r} in metrics.json: the results were edited or "
                    "mixed from two runs (run again with --force)",
                    path=path,
                    field=m,
                )
        return agg

    @cached_property
    def queries(self) -> Mapping[str, str]:
        """Query texts of the dataset the results were computed on (empty when it cannot be found)."""
        ds = (self.manifest.get("datasets") or [{}])[0]
        spec = ds.get("path") or ds.get("name")
        if not spec:
            return {}
        try:
            qpath = find_variant(resolve(spec), "queries.jsonl")
            if qpath is None:
                return {}

            return read_queries(qpath)
        except InputError:
            return {}

    def _check(self, system: str) -> None:
        if system not in self.metrics_json:
            raise InputError(
                f"no system {system!r} in results (have: {', '.join(self.systems)})", path=self.root, field="system"
            )


def load_results(path: str | Path) -> Results:
    root = Path(path)
    if not root.is_dir():
        raise InputError("results directory not found", path=root)
    metrics_path = root / "metrics.json"
    if not metrics_path.is_file():
        raise InputError("not a results directory (no metrics.json)", path=root)
    manifest = read_json(root / "manifest.json") if (root / "manifest.json").is_file() else {}
    if not isinstance(manifest, dict):
        raise InputError(f"expected a JSON object, got {type(manifest).__name__}", path=root / "manifest.json")
    metrics = read_json(metrics_path)
    if not isinstance(metrics, dict) or not all(isinstance(v, dict) for v in metrics.values()):
        raise InputError("expected a JSON object of system -> {metric: value}", path=metrics_path)
    return Results(root, manifest, metrics)


def recorded_depth(cov: Mapping[str, Any] | None) -> int | None:
    """The depth stored beside a system's coverage (metrics.json, a history entry), when it was."""
    depth = (cov or {}).get("depth")
    return depth if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0 else None


def config_from_manifest(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The parsed config a manifest records (its stored text parsed again, with the same alias bound)."""
    rec = manifest.get("config") if isinstance(manifest, Mapping) else None
    if isinstance(rec, Mapping) and isinstance(rec.get("text"), str) and "sha256" in rec:
        parsed = load_yaml_text(rec["text"], str(rec.get("file") or "manifest.json:config"))
        return dict(parsed) if isinstance(parsed, Mapping) else {}
    return dict(rec) if isinstance(rec, Mapping) else {}


def config_depth(manifest: Mapping[str, Any]) -> int | None:
    """The `depth` of the config a manifest records, or None when it has none (or cannot be read)."""
    try:
        depth = config_from_manifest(manifest).get("depth")
    except InputError:
        return None
    return depth if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0 else None


def _same_number(a: Any, b: Any) -> bool:
    """Two stored means agree: both missing (null, NaN) or both the same number."""

    def number(v: Any) -> float | None:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        return float(v) if ok else None

    x, y = number(a), number(b)
    return (x is None and y is None) or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9))
