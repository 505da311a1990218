"""The results directory: one place that knows where every file lives and how to read it back.

    <out>/manifest.json                     config, versions, fingerprints, join rule, timings, machine
    <out>/metrics.json                      {system: {metric: mean, ..., "coverage": {...}}}
    <out>/systems/<system>/run.trec         the system's TREC run (checkable with trec_eval)
    <out>/systems/<system>/status.jsonl     {"qid", "status", "latency", "error"?} per query
    <out>/systems/<system>/per_query.tsv    query × metric table (failed queries hold 0)
    <out>/systems/<system>/aggregates.json  {metric: {"mean", "ci_low", "ci_high", "n"}}, breakdowns
    <out>/systems/<system>/done.json        written last: the system is finished (resume skips it)
    <out>/systems/<system>/journal.jsonl    per-query results as they arrive (resume after a kill)
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retbench.data import QueryStatus, Run
from retbench.errors import InputError
from retbench.io.trec import read_run, write_run

if TYPE_CHECKING:
    from retbench.evaluation import Evaluation

TRACKED_PACKAGES = (
    "retbench",
    "numpy",
    "bm25s",
    "rank-bm25",
    "PyStemmer",
    "sentence-transformers",
    "transformers",
    "torch",
    "faiss-cpu",
    "scipy",
    "datasets",
)


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    try:
        with open("/proc/meminfo") as fh:
            info["memory_gib"] = round(int(fh.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    return info


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically (temp file + rename) so a kill never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", path=path, line=exc.lineno) from None


@dataclass
class SystemDir:
    """Paths of one system's results."""

    root: Path

    @property
    def run(self) -> Path:
        return self.root / "run.trec"

    @property
    def status(self) -> Path:
        return self.root / "status.jsonl"

    @property
    def per_query(self) -> Path:
        return self.root / "per_query.tsv"

    @property
    def aggregates(self) -> Path:
        return self.root / "aggregates.json"

    @property
    def done(self) -> Path:
        return self.root / "done.json"

    @property
    def journal(self) -> Path:
        return self.root / "journal.jsonl"

    def is_done(self, config_hash: str) -> bool:
        if not self.done.is_file():
            return False
        try:
            return json.loads(self.done.read_text()).get("config_hash") == config_hash
        except (json.JSONDecodeError, OSError):
            return False


def write_status(run: Run, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for q in run.query_ids:
            rec: dict[str, Any] = {"qid": q, "status": run.status[q].value}
            if q in run.latency:
                rec["latency"] = round(run.latency[q], 6)
            if q in run.errors:
                rec["error"] = run.errors[q]
            fh.write(json.dumps(rec) + "\n")


def save_run(run: Run, sysdir: SystemDir) -> None:
    """The run as TREC (for trec_eval) plus its per-query status, latency and errors."""
    sysdir.root.mkdir(parents=True, exist_ok=True)
    write_run(run, sysdir.run)
    write_status(run, sysdir.status)


def load_run(sysdir: SystemDir, name: str = "") -> Run:
    """Read a saved run back with its statuses (queries with no ranked docs come from status.jsonl)."""
    ranked = read_run(sysdir.run, name=name) if sysdir.run.is_file() and sysdir.run.stat().st_size else Run.empty(name)
    if not sysdir.status.is_file():
        return ranked
    from retbench.io.files import iter_jsonl

    parts = []
    status: dict[str, QueryStatus] = {}
    latency: dict[str, float] = {}
    errors: dict[str, str] = {}
    order: list[str] = []
    for _, rec in iter_jsonl(sysdir.status):
        q = rec["qid"]
        order.append(q)
        status[q] = QueryStatus(rec["status"])
        if "latency" in rec:
            latency[q] = rec["latency"]
        if "error" in rec:
            errors[q] = rec["error"]
    missing = [q for q in order if q not in ranked]
    parts = [ranked.subset(order)]
    if missing:
        parts.append(Run.from_dict({q: [] for q in missing}))
    full = Run.concat(parts, name=name).subset(order)
    full.status.update({q: s for q, s in status.items() if q in full})
    full.latency, full.errors = latency, errors
    return full


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
        return SystemDir(self.root / "systems" / system)

    def evaluation(self, system: str) -> Evaluation:
        from retbench.evaluation import Evaluation

        self._check(system)
        return Evaluation.from_tsv(self.system_dir(system).per_query)

    def run(self, system: str) -> Run:
        self._check(system)
        return load_run(self.system_dir(system), name=system)

    def latencies(self, system: str) -> dict[str, float]:
        return self.run(system).latency

    def aggregates(self, system: str) -> dict[str, Any]:
        self._check(system)
        return read_json(self.system_dir(system).aggregates)

    @cached_property
    def queries(self) -> Mapping[str, str]:
        """Query texts of the dataset the results were computed on (empty when it cannot be found)."""
        ds = (self.manifest.get("datasets") or [{}])[0]
        spec = ds.get("path") or ds.get("name")
        if not spec:
            return {}
        try:
            from retbench.io.datasets import resolve
            from retbench.io.files import find_variant

            qpath = find_variant(resolve(spec), "queries.jsonl")
            if qpath is None:
                return {}
            from retbench.io.beir import read_queries

            return read_queries(qpath)
        except InputError:
            return {}

    def _check(self, system: str) -> None:
        if system not in self.metrics_json:
            raise InputError(f"no system {system!r} in results (have: {', '.join(self.systems)})", path=self.root, field="system")


def load_results(path: str | Path) -> Results:
    root = Path(path)
    if not root.is_dir():
        raise InputError("results directory not found", path=root)
    metrics_path = root / "metrics.json"
    if not metrics_path.is_file():
        raise InputError("not a results directory (no metrics.json)", path=root)
    manifest = read_json(root / "manifest.json") if (root / "manifest.json").is_file() else {}
    return Results(root, manifest, read_json(metrics_path))
