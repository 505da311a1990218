"""Writing and reading a cell's result files, through the one writer.

The writer itself (atomic, strict JSON, redacted: `write_json`, `write_jsonl`, `write_text`,
`AppendLog`) lives in `io.files`, low enough in the layers that the LLM call log, the caches and
every study use the same one: import it from there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retbench.data import QueryStatus, Run
from retbench.data.answers import SystemAnswer
from retbench.data.status import RUN_STATUSES
from retbench.errors import InputError
from retbench.io.files import atomic_text, iter_jsonl, json_line, write_jsonl
from retbench.io.run_files import read_beside, write_run_files
from retbench.results.layout import SystemDir

if TYPE_CHECKING:
    from retbench.evaluation import Evaluation

__all__ = ["load_answers", "load_run", "read_json", "save_answers", "save_run", "save_table", "write_status"]


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", path=path, line=exc.lineno) from None


def write_status(run: Run, path: Path, extra: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """{"qid", "status", "latency"?, "latency_batch"?, "error"?, **extra[qid]} per query (extra: e.g. the query's scope stage),
    one strict JSON object a line, atomically."""
    with atomic_text(path) as fh:
        for q in run.query_ids:
            rec: dict[str, Any] = {"qid": q, "status": run.status[q].value, **(extra or {}).get(q, {})}
            if q in run.latency:
                rec["latency"] = round(run.latency[q], 6)
            if q in run.latency_batch:
                rec["latency_batch"] = run.latency_batch[q]
            if q in run.errors:
                rec["error"] = run.errors[q]
            fh.write(json_line(rec, ensure_ascii=True))


def save_run(run: Run, sysdir: SystemDir, extra: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """The run as TREC (for trec_eval) with its columnar copy beside it (`run.arrow`, what retbench reads back),
    plus its per-query status, latency, errors and `extra` fields; each atomic."""
    sysdir.root.mkdir(parents=True, exist_ok=True)
    write_run_files(run, sysdir.run)
    write_status(run, sysdir.status, extra)


def save_answers(answers: Mapping[str, SystemAnswer], sysdir: SystemDir) -> None:
    """The answer side of every query (`{"id", "answer", "references", ...}` a line), atomically."""
    write_jsonl(sysdir.answers, ({"id": qid, **a.to_dict()} for qid, a in answers.items()))


def load_answers(sysdir: SystemDir) -> dict[str, SystemAnswer]:
    """The answers `save_answers` wrote ({} when the system gave none)."""
    if not sysdir.answers.is_file():
        return {}
    from retbench.io.outputs import read_outputs

    return read_outputs(sysdir.answers).answers


def save_table(evaluation: Evaluation, sysdir: SystemDir) -> None:
    """The per-query table (`Evaluation.to_tsv`), atomically."""
    evaluation.to_tsv(sysdir.per_query)  # the table writer is atomic itself


def load_run(sysdir: SystemDir, name: str = "") -> Run:
    """Read a saved run back with its statuses (queries with no ranked docs come from status.jsonl), through its
    columnar copy where one newer than run.trec lies beside it (`io.run_files.read_beside`)."""
    ranked = (
        read_beside(sysdir.run, name=name) if sysdir.run.is_file() and sysdir.run.stat().st_size else Run.empty(name)
    )
    if not sysdir.status.is_file():
        return ranked
    status: dict[str, QueryStatus] = {}
    latency: dict[str, float] = {}
    batch: dict[str, int] = {}
    errors: dict[str, str] = {}
    order: list[str] = []
    for line, rec in iter_jsonl(sysdir.status):
        q, st = rec.get("qid"), rec.get("status")
        if not isinstance(q, str) or not q:
            raise InputError("'qid' must be a non-empty string", path=sysdir.status, line=line, field="qid")
        if st not in RUN_STATUSES:
            raise InputError(f"unknown status {st!r:.40}", path=sysdir.status, line=line, field="status")
        order.append(q)
        status[q] = QueryStatus(st)
        if rec.get("latency") is not None:
            latency[q] = rec["latency"]
        if isinstance(rec.get("latency_batch"), int):
            batch[q] = rec["latency_batch"]
        if "error" in rec:
            errors[q] = rec["error"]
    missing = [q for q in order if q not in ranked]
    parts = [ranked.subset(order)]
    if missing:
        parts.append(Run.from_dict({q: [] for q in missing}))
    full = Run.concat(parts, name=name).subset(order)
    full.status.update({q: s for q, s in status.items() if q in full})
    full.latency, full.errors = latency, errors
    full.latency_batch = {q: n for q, n in batch.items() if n > 1}
    return full
