"""An append-only per-query journal, so a killed run resumes without redoing or losing work.

One JSON object per line. The first line is a header carrying the fingerprint of the configuration
that wrote the journal: resuming under a different configuration would mix incomparable results, so
it is refused. Every other line is one finished unit of work (a query of `retbench run`, a request
of `retbench stress`) under a unique `key`.

Durability: records are buffered and written in batches, each batch with one `write` and an
`fsync`, so a SIGKILL loses at most the batch not yet flushed, and a power cut at most the batch
being written. A record is only "done" once its line (with its newline) is on disk; a process
killed mid-write leaves a torn last line, which opening the journal drops (and truncates away, so
the next append starts on a clean line). A malformed line anywhere else is real corruption and is
reported with its line number rather than skipped.

A query record may carry the query's answer side (`answer`: the outputs-file form of a
`SystemAnswer`), so a RAG system's answers survive a kill with their rankings.

A record repeated under the same key (possible only if two writers shared a file) is kept once:
the first occurrence wins and `duplicates` counts the rest.

A record of the right shape whose content retbench never writes is *damaged*: a query record (one with
a `status`, `docs` or `scores`) without a query id, a query or document id that is not a usable id, a
NaN, infinite or out-of-range score, or a NaN, infinite or negative latency. (A backend's invalid answer
is journaled as status `invalid` with an empty ranking, never with the bad id or score itself.) A
damaged record is not counted as done: its query is asked again, and a warning names the journal file
and line (`damaged` keeps them), so nothing is imputed and nothing is lost silently.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from retbench.data import QueryStatus, Run, RunBuilder
from retbench.data.answers import SystemAnswer
from retbench.data.ids import answer_problem, id_problem
from retbench.data.status import RUN_STATUSES
from retbench.errors import ConfigError, InputError
from retbench.jsontypes import JSONObject
from retbench.secrets import redact

FORMAT = "retbench-journal/1"
_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
log = logging.getLogger("retbench.journal")
# damaged records already warned about in this process (a cell opens its journal several times)
_SAID: set[tuple[str, int]] = set()


class Journal:
    """A JSONL journal of finished work, opened for appending (and resuming)."""

    def __init__(
        self, path: str | Path, fingerprint: str = "", *, batch_size: int = 64, meta: Mapping[str, object] | None = None
    ) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.batch_size = max(1, batch_size)
        self.torn = 0  # torn trailing lines dropped on open
        self.duplicates = 0
        self.damaged: list[tuple[int, str]] = []  # (line, reason) of records set aside on open: asked again
        self._records: list[dict[str, Any]] = []
        self._keys: set[str] = set()
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = self._load()
        self._fh = open(self.path, "ab")  # noqa: SIM115  (held open for appends; closed in close())
        if header is None:
            self._write_lines(
                [json.dumps({"type": "header", "format": FORMAT, "fingerprint": fingerprint, **(meta or {})})]
            )
            self.header: dict[str, Any] = {"fingerprint": fingerprint, **(meta or {})}
        else:
            self.header = header

    # -- reading -------------------------------------------------------------------------------
    def _load(self) -> JSONObject | None:
        """Read what a previous process left; returns its header (None for a new journal)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return None
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):  # the last line never got its newline: a torn write
            self.torn += 1
        lines = data[:end].split(b"\n")[:-1]
        parsed: list[JSONObject] = []
        damaged: list[tuple[int, str, object]] = []
        for lineno, raw in enumerate(lines, 1):
            try:
                obj = json.loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                if lineno == len(lines):  # a complete-looking but garbled last line (e.g. zero-filled after a crash)
                    self.torn += 1
                    end -= len(raw) + 1
                    break
                raise InputError(
                    f"journal line is not a JSON object ({exc}); {_REPAIR_HINT.format(n=len(lines) - lineno + 1)}",
                    path=self.path,
                    line=lineno,
                ) from None
            problem = record_problem(obj) if lineno > 1 else None
            if problem:
                raise InputError(
                    f"journal record of the wrong shape ({problem}); {_REPAIR_HINT.format(n=len(lines) - lineno + 1)}",
                    path=self.path,
                    line=lineno,
                )
            damage = record_damage(obj) if lineno > 1 else None
            if damage:
                damaged.append((lineno, damage, obj.get("key")))
                continue
            parsed.append(obj)
        if end < len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(end)
                fh.flush()
                os.fsync(fh.fileno())
        if not parsed:
            return None
        header, body = parsed[0], parsed[1:]
        if header.get("type") != "header":
            raise InputError("journal has no header line; it was not written by retbench", path=self.path, line=1)
        if self.fingerprint and header.get("fingerprint") != self.fingerprint:
            raise ConfigError(
                "journal was written by a different configuration: the system, its parameters, the data or the "
                f"depth changed since (fingerprint {header.get('fingerprint')!r}, now {self.fingerprint!r}), so its "
                "answers cannot be resumed; pass --force to redo this system from scratch (`retbench run`, "
                "`retbench chunking`), or write to another output folder",
                path=self.path,
            )
        for obj in body:
            self._remember(obj)
        self._say_damaged(damaged)
        return header

    def _say_damaged(self, damaged: list[tuple[int, str, object]]) -> None:
        """Warn once per process about each damaged record whose query has not been answered again since."""
        for lineno, reason, key in damaged:
            self.damaged.append((lineno, reason))
            said = (str(self.path.resolve()), lineno)
            if key in self._keys or said in _SAID:
                continue
            _SAID.add(said)
            log.warning(
                "%s:%d: damaged journal record (%s): not counted as done, asked again", self.path, lineno, reason
            )

    def _remember(self, obj: dict[str, Any]) -> bool:
        key = obj.get("key")
        if key is None:
            return False
        if key in self._keys:
            self.duplicates += 1
            return False
        self._keys.add(key)
        self._records.append(obj)
        return True

    def done(self) -> set[str]:
        """Keys of every finished unit, including those appended (and flushed or not) in this process."""
        with self._lock:
            return set(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def records(self, where: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
        """Finished records in the order they were journaled, optionally filtered."""
        with self._lock:
            recs = list(self._records)
        return [r for r in recs if where is None or where(r)]

    def replay(self, where: Callable[[dict[str, Any]], bool] | None = None, name: str = "") -> Run:
        """The journaled query records (optionally filtered) as a Run, one entry per query id."""
        return run_from_records(self.records(where), name=name)

    # -- writing -------------------------------------------------------------------------------
    def append(self, key: str, **fields: object) -> None:
        """Record one finished unit; written with the next batch (see `flush`)."""
        obj = {"key": key, **fields}
        line = _ENCODE(obj)
        with self._lock:
            if not self._remember(obj):
                raise ValueError(f"journal already holds key {key!r}")
            self._pending.append(line)
            full = len(self._pending) >= self.batch_size
        if full:
            self.flush()

    def append_query(
        self,
        key: str,
        qid: str,
        ranking: Sequence[tuple[str, float]] = (),
        *,
        status: QueryStatus | str = QueryStatus.OK,
        latency: float | None = None,
        error: str | None = None,
        latency_batch: int | None = None,
        **extra: object,
    ) -> None:
        """Record one answered (or failed) query in the shape `replay` reads back (`latency_batch`: the queries its
        latency is an even share of, written only when more than one)."""
        if latency_batch is not None and latency_batch > 1:
            extra["latency_batch"] = int(latency_batch)
        ranking = list(ranking)
        problem = answer_problem(ranking) if ranking else None
        if problem is not None:  # journaled as RunBuilder records it: a NaN or bad id never reaches the file
            ranking, status = [], QueryStatus.INVALID
            error = f"invalid answer: {problem}" + (f"; {error}" if error else "")
        self.append(
            key,
            qid=qid,
            status=QueryStatus(status).value,
            docs=[d for d, _ in ranking],
            scores=[float(s) for _, s in ranking],
            latency=latency,
            error=error,
            **extra,
        )

    def flush(self) -> None:
        """Write the pending records in one batch and fsync it."""
        with self._lock:
            lines, self._pending = self._pending, []
            if lines:
                self._write_lines(lines)

    def _write_lines(self, lines: Iterable[str]) -> None:
        self._fh.write((redact("\n".join(lines)) + "\n").encode("utf-8"))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if not self._fh.closed:
            self.flush()
            self._fh.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._keys)


_REPAIR_HINT = "run again with --repair to set aside this line and the {n} from here on and redo those queries"


def record_problem(obj: Mapping[str, object]) -> str | None:
    """Why a journal record cannot be replayed (None when it can): the fields replay reads, by type."""
    if not isinstance(obj.get("key"), str):
        return "'key' must be a string"
    if "qid" in obj and (not isinstance(obj["qid"], str) or not obj["qid"]):
        return "'qid' must be a non-empty string"
    if "status" in obj and obj["status"] not in RUN_STATUSES:
        return f"unknown status {obj['status']!r:.40}"
    docs, scores = obj.get("docs"), obj.get("scores")
    if docs is not None or scores is not None:
        if not isinstance(docs, list) or not isinstance(scores, list) or len(docs) != len(scores):
            return "'docs' and 'scores' must be lists of the same length"
        if not all(isinstance(d, str) for d in docs):
            return "'docs' must hold string ids"
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in scores):
            return "'scores' must hold numbers"
    for name in ("latency", "t"):
        if obj.get(name) is not None and (isinstance(obj[name], bool) or not isinstance(obj[name], (int, float))):
            return f"'{name}' must be a number"
    batch = obj.get("latency_batch")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        return "'latency_batch' must be a positive integer"
    if obj.get("error") is not None and not isinstance(obj["error"], str):
        return "'error' must be a string"
    if "answer" in obj and not isinstance(obj["answer"], dict):
        return "'answer' must be an object (the query's answer side)"
    for name in ("i", "level"):
        if name in obj and (isinstance(obj[name], bool) or not isinstance(obj[name], int)):
            return f"'{name}' must be an integer"
    return None


_QUERY_FIELDS = ("status", "docs", "scores")


def record_damage(obj: Mapping[str, object]) -> str | None:
    """Why a well-shaped record (see `record_problem`) holds what retbench never writes, or None: its query is
    asked again rather than replayed (a record missing its query id would otherwise count as done and never be
    answered; a NaN score or bad id would be replayed as the backend's invalid answer)."""
    qid = obj.get("qid")
    if qid is None:
        return "a query record without 'qid'" if any(f in obj for f in _QUERY_FIELDS) else None
    reason = id_problem(qid)
    if reason:
        return f"query {reason}"
    docs, scores = obj.get("docs"), obj.get("scores")
    if isinstance(docs, list) and isinstance(scores, list) and docs:  # equal lengths: record_problem checked
        reason = answer_problem(list(zip(docs, scores, strict=True)))
        if reason:
            return reason
    latency = obj.get("latency")
    if isinstance(latency, (int, float)) and not (math.isfinite(latency) and latency >= 0):
        return f"latency must be a finite number >= 0, got {latency!r}"
    return None


def repair_journal(path: str | Path) -> int:
    """Set aside a journal's first unreadable record and everything after it; returns how many lines went.

    The dropped lines are appended to `<journal>.dropped` (kept for inspection, never deleted); the
    queries they recorded are redone by the next run, so nothing is imputed.
    """
    p = Path(path)
    if not p.is_file():
        return 0
    data = p.read_bytes()
    lines = data.split(b"\n")
    offset = 0
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            offset += len(raw) + 1
            continue
        try:
            obj = json.loads(raw)
            bad = not isinstance(obj, dict) or (lineno > 1 and record_problem(obj) is not None)
        except ValueError:
            bad = True
        if bad:
            tail = data[offset:]
            with open(p.with_name(p.name + ".dropped"), "ab") as fh:
                fh.write(tail if tail.endswith(b"\n") else tail + b"\n")
            with open(p, "r+b") as fh:
                fh.truncate(offset)
                fh.flush()
                os.fsync(fh.fileno())
            return sum(1 for x in tail.split(b"\n") if x.strip())
        offset += len(raw) + 1
    return 0


def journaled_answers(journal: Journal) -> dict[str, SystemAnswer]:
    """{query id: SystemAnswer} of the query records that carry an answer side (first record of a query wins)."""
    from retbench.io.answers import parse_answer

    out: dict[str, SystemAnswer] = {}
    for r in journal.records(lambda r: isinstance(r.get("answer"), dict)):
        qid = r.get("qid")
        if qid is not None and qid not in out and (answer := parse_answer(r["answer"], journal.path, None)):
            out[qid] = answer
    return out


def run_from_records(records: Iterable[Mapping[str, Any]], name: str = "") -> Run:
    """A Run from query records (first record of each query id wins), statuses and errors kept."""
    builder = RunBuilder(name)
    seen: set[str] = set()
    for r in records:
        qid = r.get("qid")
        if qid is None or qid in seen:
            continue
        seen.add(qid)
        ranking = list(zip(r.get("docs") or [], r.get("scores") or [], strict=True))
        builder.add(
            qid,
            ranking,
            status=QueryStatus(r.get("status", "ok")),
            latency=r.get("latency"),
            error=r.get("error"),
            batch=r.get("latency_batch"),
        )
    return builder.build()
