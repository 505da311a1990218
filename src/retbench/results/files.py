"""Writing and reading a system's result files: atomic JSON, the TREC run with its per-query statuses."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retbench.data import QueryStatus, Run
from retbench.errors import InputError
from retbench.io.files import iter_jsonl
from retbench.io.trec import read_run, write_run

if TYPE_CHECKING:
    pass
from retbench.results.layout import SystemDir
from retbench.secrets import redact


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically (temp file + rename) so a kill never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(redact(json.dumps(obj, indent=2, sort_keys=False, default=str)) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", path=path, line=exc.lineno) from None


def write_status(run: Run, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for q in run.query_ids:
            rec: dict[str, Any] = {"qid": q, "status": run.status[q].value}
            if q in run.latency:
                rec["latency"] = round(run.latency[q], 6)
            if q in run.errors:
                rec["error"] = run.errors[q]
            fh.write(redact(json.dumps(rec)) + "\n")


def save_run(run: Run, sysdir: SystemDir) -> None:
    """The run as TREC (for trec_eval) plus its per-query status, latency and errors."""
    sysdir.root.mkdir(parents=True, exist_ok=True)
    write_run(run, sysdir.run)
    write_status(run, sysdir.status)


_STATUSES = frozenset(st.value for st in QueryStatus)


def load_run(sysdir: SystemDir, name: str = "") -> Run:
    """Read a saved run back with its statuses (queries with no ranked docs come from status.jsonl)."""
    ranked = read_run(sysdir.run, name=name) if sysdir.run.is_file() and sysdir.run.stat().st_size else Run.empty(name)
    if not sysdir.status.is_file():
        return ranked

    parts = []
    status: dict[str, QueryStatus] = {}
    latency: dict[str, float] = {}
    errors: dict[str, str] = {}
    order: list[str] = []
    for line, rec in iter_jsonl(sysdir.status):
        q, st = rec.get("qid"), rec.get("status")
        if not isinstance(q, str) or not q:
            raise InputError("'qid' must be a non-empty string", path=sysdir.status, line=line, field="qid")
        if st not in _STATUSES:
            raise InputError(f"unknown status {st!r:.40}", path=sysdir.status, line=line, field="status")
        order.append(q)
        status[q] = QueryStatus(st)
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
