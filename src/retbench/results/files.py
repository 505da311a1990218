"""Writing and reading a cell's result files.

Every file is written atomically: to a temporary file beside it, flushed, then renamed over the
old one, so a kill mid-write leaves the previous version (or nothing), never half a file that a
reader would accept. JSON is strict (no NaN or Infinity: see `io.files.json_safe`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from retbench.data import QueryStatus, Run
from retbench.data.answers import SystemAnswer
from retbench.errors import InputError
from retbench.io.files import iter_jsonl, json_safe
from retbench.io.trec import read_run, write_run
from retbench.results.layout import SystemDir
from retbench.secrets import redact


def replace_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Call `write(tmp)` for a temporary path beside `path`, fsync it, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_text(path: Path) -> Iterator[IO[str]]:
    """A text file handle whose content replaces `path` only when the block ends without error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def dumps(obj: Any) -> str:
    """Strict JSON text of `obj` (non-finite floats become null)."""
    return redact(json.dumps(json_safe(obj), indent=2, default=str, allow_nan=False)) + "\n"


def write_json(path: Path, obj: Any) -> None:
    """Write strict JSON atomically (temp file + rename) so a kill never leaves half a file."""
    with atomic_text(path) as fh:
        fh.write(dumps(obj))


def write_text(path: Path, text: str) -> None:
    """Write a text file (a report) atomically."""
    with atomic_text(path) as fh:
        fh.write(text)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", path=path, line=exc.lineno) from None


def write_status(run: Run, path: Path) -> None:
    """{"qid", "status", "latency"?, "error"?} per query, one strict JSON object a line, atomically."""
    with atomic_text(path) as fh:
        for q in run.query_ids:
            rec: dict[str, Any] = {"qid": q, "status": run.status[q].value}
            if q in run.latency:
                rec["latency"] = round(run.latency[q], 6)
            if q in run.errors:
                rec["error"] = run.errors[q]
            fh.write(redact(json.dumps(json_safe(rec), allow_nan=False)) + "\n")


def save_run(run: Run, sysdir: SystemDir) -> None:
    """The run as TREC (for trec_eval) plus its per-query status, latency and errors; both atomic."""
    sysdir.root.mkdir(parents=True, exist_ok=True)
    replace_atomically(sysdir.run, lambda tmp: write_run(run, tmp))
    write_status(run, sysdir.status)


def save_answers(answers: Mapping[str, SystemAnswer], sysdir: SystemDir) -> None:
    """The answer side of every query (`{"id", "answer", "references", ...}` a line), atomically."""
    with atomic_text(sysdir.answers) as fh:
        for qid, a in answers.items():
            fh.write(redact(json.dumps(json_safe({"id": qid, **a.to_dict()}), ensure_ascii=False)) + "\n")


def load_answers(sysdir: SystemDir) -> dict[str, SystemAnswer]:
    """The answers `save_answers` wrote ({} when the system gave none)."""
    if not sysdir.answers.is_file():
        return {}
    from retbench.io.golden import read_outputs

    return read_outputs(sysdir.answers).answers


def save_table(evaluation: Any, sysdir: SystemDir) -> None:
    """The per-query table (`Evaluation.to_tsv`), atomically."""
    replace_atomically(sysdir.per_query, evaluation.to_tsv)


_STATUSES = frozenset(st.value for st in QueryStatus)


def load_run(sysdir: SystemDir, name: str = "") -> Run:
    """Read a saved run back with its statuses (queries with no ranked docs come from status.jsonl)."""
    ranked = read_run(sysdir.run, name=name) if sysdir.run.is_file() and sysdir.run.stat().st_size else Run.empty(name)
    if not sysdir.status.is_file():
        return ranked
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
        if rec.get("latency") is not None:
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
