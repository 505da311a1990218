"""The one reader: any results folder (this version's or an earlier one's) read back into a `StudyResult`.

Version 2 folders (`schema_version` in metrics.json) hold the typed layout of `results.model`. Version 1
folders (no `schema_version`) put each system's means and its blocks in one object and the CIs in
aggregates.json; they are converted here (numbers and nulls are metrics, known names are blocks), so
every consumer sees one shape whichever version wrote the folder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.data import Corpus, Qrels, Run
from retbench.errors import InputError
from retbench.evaluation import Evaluation
from retbench.io.beir import qrels_splits, read_qrels_tsv, read_queries
from retbench.io.datasets import load_dataset, resolve
from retbench.io.files import find_variant
from retbench.results.files import load_run, read_json
from retbench.results.layout import SystemDir
from retbench.results.model import (
    BLOCKS,
    SCHEMA_VERSION,
    MetricValue,
    StudyManifest,
    StudyResult,
    SystemResult,
    config_depth,
    config_from_manifest,
    recorded_depth,
)

__all__ = [
    "FolderTables",
    "config_depth",
    "config_from_manifest",
    "judge_reasons",
    "judgements",
    "load_judgements",
    "load_results",
    "read_done",
    "read_results",
    "recorded_depth",
    "system_from_done",
    "system_from_v1",
]

#: version-1 blocks kept as they were; the chunking study's own figures go to `extra`
_V1_BLOCKS = frozenset(BLOCKS) - {"extra", "first_stage"}


@dataclass
class FolderTables:
    """A results folder's per-query tables, runs and query texts, read when first asked for."""

    root: Path
    manifest: StudyManifest
    _queries: Mapping[str, str] | None = field(default=None, repr=False)

    def evaluation(self, key: str) -> Evaluation:
        return Evaluation.from_tsv(SystemDir.of(self.root, key).per_query)

    def run(self, key: str) -> Run:
        return load_run(SystemDir.of(self.root, key), name=key)

    def queries(self) -> Mapping[str, str]:
        """Query texts of the first dataset the results were computed on (empty when it cannot be found)."""
        if self._queries is None:
            self._queries = self._find_queries()
        return self._queries

    def _find_queries(self) -> Mapping[str, str]:
        ds = (self.manifest.datasets or [{}])[0]
        spec = ds.get("path") or ds.get("name")
        if not spec:
            return {}
        try:
            qpath = find_variant(resolve(spec), "queries.jsonl")
            return read_queries(qpath) if qpath is not None else {}
        except InputError:
            return {}


def judge_reasons(root: str | Path, key: str) -> dict[str, dict[str, tuple[str, str]]]:
    """{query id: {judged metric: (verdict, reasoning)}} of the verdicts a cell's judge gave with a reason.

    Read from the cell's judged.json: a rubric's record (`rubric:<name>`, value `{"value", "reasoning"}`) and
    any other verdict whose value carries a `reasoning` string (correctness). The verdict is the value as
    text, or the status when there is none (`unparseable`, `judge_error`): a failed verdict is shown as one.
    Empty when the cell was not judged or its file cannot be read (the report then shows no reasoning).
    """
    path = SystemDir.of(root, key).judged
    try:
        stored = read_json(path) if path.is_file() else {}
    except InputError:
        return {}
    verdicts = stored.get("verdicts") if isinstance(stored, dict) else None
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for qid, records in (verdicts or {}).items():
        for name, rec in (records or {}).items() if isinstance(records, dict) else ():
            if not isinstance(rec, dict):
                continue
            value = rec.get("value")
            said = value.get("reasoning") if isinstance(value, dict) else None
            if not (name.startswith("rubric:") or isinstance(said, str)):
                continue
            shown = {k: v for k, v in value.items() if k != "reasoning"} if isinstance(value, dict) else {}
            verdict = _verdict_text(shown) if rec.get("status") == "ok" else str(rec.get("status"))
            out.setdefault(str(qid), {})[name.removeprefix("rubric:")] = (
                verdict,
                said if isinstance(said, str) else "",
            )
    return out


def _verdict_text(value: Mapping[str, Any]) -> str:
    """A verdict's value as the drill-down prints it: the one number, else `key=value` pairs."""
    if len(value) == 1:
        return str(next(iter(value.values())))
    return ", ".join(f"{k}={v}" for k, v in value.items())


def read_results(path: str | Path) -> StudyResult:
    """Read a results folder (metrics.json, manifest.json) into a `StudyResult`; tables are read on demand."""
    root = Path(path)
    if not root.is_dir():
        raise InputError("results directory not found", path=root)
    metrics_path = root / "metrics.json"
    if not metrics_path.is_file():
        raise InputError("not a results directory (no metrics.json)", path=root)
    man_path = root / "manifest.json"
    stored = read_json(man_path) if man_path.is_file() else {}
    if not isinstance(stored, dict):
        raise InputError(f"expected a JSON object, got {type(stored).__name__}", path=man_path)
    manifest = StudyManifest(stored)
    doc = read_json(metrics_path)
    if not isinstance(doc, dict):
        raise InputError("expected a JSON object", path=metrics_path)
    v2 = "schema_version" in doc
    systems = _read_v2(doc, metrics_path) if v2 else _read_v1(doc, root, manifest, metrics_path)
    return StudyResult(manifest, systems, root, source=FolderTables(root, manifest))


#: the name every caller of the earlier reader used
load_results = read_results


def _read_v2(doc: Mapping[str, Any], where: Path) -> dict[str, SystemResult]:
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise InputError(
            f"schema_version {version!r} is newer than this retbench reads ({SCHEMA_VERSION}); upgrade retbench",
            path=where,
            field="schema_version",
        )
    systems = doc.get("systems")
    if not isinstance(systems, dict) or not all(isinstance(v, dict) for v in systems.values()):
        raise InputError("expected 'systems': an object of system -> result", path=where, field="systems")
    out = {}
    for key, entry in systems.items():
        _check_values(entry, f"systems.{key}", where)
        try:
            out[key] = SystemResult.from_dict(key, entry)
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"malformed result ({exc})", path=where, field=f"systems.{key}") from None
    return out


def _same_number(a: object, b: object) -> bool:
    """Two stored means agree: both missing (null, NaN) or both the same number."""

    def number(v: object) -> float | None:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
        return None

    x, y = number(a), number(b)
    return (x is None and y is None) or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9))


def _check_values(entry: Mapping[str, Any], field: str, where: Path) -> None:
    """Every stored value an object whose `value` is a finite number or null (NaN: no counted query)."""
    for block in ("metrics", "first_stage"):
        values = entry.get(block) or {}
        if not isinstance(values, Mapping):
            raise InputError("expected an object of metric -> value", path=where, field=f"{field}.{block}")
        for m, v in values.items():
            x = v.get("value") if isinstance(v, Mapping) else v
            if not isinstance(v, Mapping) or not _is_mean(x) or (isinstance(x, float) and math.isinf(x)):
                raise InputError(
                    f"value must be a number or null, got {x!r:.40}", path=where, field=f"{field}.{block}.{m}"
                )


def _read_v1(doc: Mapping[str, Any], root: Path, manifest: StudyManifest, where: Path) -> dict[str, SystemResult]:
    if not all(isinstance(v, dict) for v in doc.values()):
        raise InputError("expected a JSON object of system -> {metric: value}", path=where)
    out = {}
    for key, row in doc.items():
        agg_path = SystemDir.of(root, key).aggregates
        agg = read_json(agg_path) if agg_path.is_file() else {}
        resources = manifest.system(key).get("resources")
        out[key] = system_from_v1(key, row, agg if isinstance(agg, dict) else {}, where)
        for m, a in agg.items() if isinstance(agg, dict) else ():
            # each mean in aggregates.json is the one its interval was computed with: a disagreement (files edited,
            # or mixed from two runs) would show an interval beside another number
            if isinstance(a, dict) and m in row and not _same_number(a.get("mean"), row[m]):
                raise InputError(
                    f"mean {a.get('mean')!r} here but {row[m]!r} in metrics.json: the results were edited or "
                    "mixed from two runs (run again with --force)",
                    path=agg_path,
                    field=m,
                )
        if out[key].resources is None and isinstance(resources, dict):
            out[key].resources = resources
    return out


def _is_mean(v: object) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def system_from_v1(
    key: str, row: Mapping[str, Any], aggregates: Mapping[str, Any] | None = None, where: Path | None = None
) -> SystemResult:
    """A version-1 metrics.json entry (means and blocks in one object) with its aggregates.json."""
    aggregates = aggregates or {}
    res = SystemResult(key)
    extra: dict[str, Any] = {}
    for name, v in row.items():
        if _is_mean(v):  # numbers and nulls are means, whatever their name
            if isinstance(v, float) and math.isinf(v):
                raise InputError(f"mean must be a number or null, got {v!r}", path=where, field=f"{key}.{name}")
            agg = aggregates.get(name)
            given = dict(agg) if isinstance(agg, Mapping) else {}
            res.metrics[name] = MetricValue.from_aggregate({**given, "mean": v})
        elif name == "first_stage" and isinstance(v, Mapping):
            res.first_stage = {m: MetricValue(math.nan if x is None else float(x)) for m, x in v.items()}
        elif name == "error" and isinstance(v, str):
            res.error = v
        elif name in _V1_BLOCKS and isinstance(v, Mapping):
            setattr(res, name, dict(v))
        else:
            extra[name] = v
    if extra:
        res.extra = extra
    return res


def system_from_done(key: str, done: Mapping[str, Any], aggregates: Mapping[str, Any] | None = None) -> SystemResult:
    """The result a cell's done.json records (version 2: `result`; version 1: the flat `metrics` entry, with
    the CIs of its aggregates.json)."""
    if isinstance(done.get("result"), Mapping):
        return SystemResult.from_dict(key, done["result"])
    return system_from_v1(key, done.get("metrics") or {}, aggregates)


@dataclass
class Done:
    """A finished cell's done.json: its hash, result, manifest, failed-query count and timings."""

    config_hash: str | None
    result: SystemResult
    manifest: dict[str, Any]
    failed_queries: int
    first_error: str | None
    timings: dict[str, float]


def read_done(sysdir: SystemDir, key: str) -> Done:
    """The done.json a cell wrote last (this version's or an earlier one's)."""
    done = read_json(sysdir.done)
    if not isinstance(done, dict):
        raise InputError("expected a JSON object", path=sysdir.done)
    agg = read_json(sysdir.aggregates) if "result" not in done and sysdir.aggregates.is_file() else None
    return Done(
        done.get("config_hash"),
        system_from_done(key, done, agg if isinstance(agg, dict) else None),
        dict(done.get("manifest") or {}),
        int(done.get("failed_queries") or 0),
        done.get("first_error"),
        dict(done.get("timings") or {}),
    )


def judgements(result: StudyResult) -> tuple[Qrels, Corpus] | None:
    """(qrels, corpus) of a one-dataset study: held in memory by a study that just ran, else read from the
    dataset its manifest names; None when that cannot be read."""
    texts = result.texts
    return (texts.qrels, texts.corpus) if texts is not None else load_judgements(result.manifest.data)


def load_judgements(manifest: Mapping[str, Any]) -> tuple[Qrels, Corpus] | None:
    """(qrels, corpus) of the first dataset the results were computed on, or None when it cannot be read."""
    ds = (manifest.get("datasets") or [{}])[0]
    spec = ds.get("path") or ds.get("name")
    if not spec:
        return None
    split = ds.get("split") or "test"
    try:
        dataset = load_dataset(spec, [split], join_rule=ds.get("join_rule") or "title_space_text")
    except (InputError, OSError):
        return None
    return dataset.split(split), dataset.corpus


def load_qrels(manifest: Mapping[str, Any]) -> Qrels | None:
    """The qrels of a one-dataset study (None: several datasets, or the dataset cannot be read): from a BEIR
    folder's qrels file alone when it is one (the corpus is not read), else from the whole dataset."""
    datasets = manifest.get("datasets") or []
    if len(datasets) != 1:
        return None
    ds = datasets[0]
    try:
        folder = resolve(ds.get("path") or ds.get("name") or "")
        found = qrels_splits(folder).get(ds.get("split") or "test")
        if found is not None and find_variant(folder, "corpus.jsonl") is not None:
            return read_qrels_tsv(found)[0]
    except (InputError, OSError):
        pass
    whole = load_judgements(manifest)
    return whole[0] if whole is not None else None
