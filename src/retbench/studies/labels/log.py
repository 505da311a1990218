"""The label log: people's grades of a study's pooled pairs, one event a line in `STUDY/labels.jsonl`.

Every event is written whole in one `write` on an append-only descriptor, flushed and `fsync`ed before the
call returns, under a lock held across threads (a `threading.Lock`) and processes (`flock` on the file). So:

- a killed server (SIGKILL) or a closed browser loses at most the label not yet stored: an event that was
  acknowledged is on disk; a power cut loses nothing acknowledged either (the fsync is per event);
- a writer killed inside its `write` leaves a torn last line. Readers ignore it with a note; the next writer
  cuts it off (under the lock, so it cannot be another writer's line in progress) before appending, so the
  file never holds a torn line in its middle and a line's index never changes once written.

The events (field names are the study contract's):

    {"event": "grade"|"skip"|"undo", "pair_id", "qid", "doc_id", "grade": int|null, "labeller", "at",
     "shown": {"query", "doc_sha256", "llm_hidden": true, "highlight": [...]}, "undoes": int|null}

`undoes` is the 0-based line index of the event an undo takes back. Undo is a stack per labeller: it takes back
that labeller's latest grade or skip not already undone, so pressing it twice takes back the last two. A pair's
effective label for a labeller is their last grade of it not undone; a skip is not a label (it only takes the
pair out of that labeller's queue until undone).

Agreement between people: for each two labellers, Cohen's kappa (Cohen 1960; `agreement.kappa`) on the pairs
both graded, with grades cut to relevant (grade >= `relevant_from`, default 1 as trec_eval's binary measures)
or not; also the share of those pairs with exactly the same grade.

One grade per pair for the study's estimate (`Labels.human_grades`): the lower median of the labellers'
effective grades. `retbench.studies.labels.answer` reads labels only through this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from retbench.errors import InputError
from retbench.io.files import json_line
from retbench.studies.labels.agreement import kappa

LABELS_FILE = "labels.jsonl"
EVENTS = ("grade", "skip", "undo")
MAX_LABELLER = 64


class LabelConflict(InputError):
    """A well-formed request the log says no to: a pair already answered otherwise, nothing left to undo."""


def now_utc() -> str:
    """ISO-8601 UTC with milliseconds, as events record `at`."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def doc_sha256(text: str) -> str:
    """The fingerprint of a document's text as shown (UTF-8), so a label names exactly what was read."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_labeller(name: object) -> str:
    """A labeller name as stored: text of 1..64 printable characters, outer spaces removed."""
    if not isinstance(name, str) or not name.strip():
        raise InputError("a labeller name is required (non-empty text)", field="labeller")
    name = name.strip()
    if len(name) > MAX_LABELLER or not name.isprintable():
        raise InputError(f"a labeller name is at most {MAX_LABELLER} printable characters", field="labeller")
    return name


@dataclass
class Labels:
    """What a log says at one moment: every valid event with its line index, and the note on a torn tail."""

    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    note: str | None = None

    def undone(self) -> set[int]:
        """Line indexes of events taken back by an undo."""
        return {int(e["undoes"]) for _, e in self.events if e["event"] == "undo" and e.get("undoes") is not None}

    def active(self, labeller: str | None = None) -> list[tuple[int, dict[str, Any]]]:
        """Grades and skips not undone (of one labeller, or everyone's), in log order."""
        gone = self.undone()
        return [
            (i, e)
            for i, e in self.events
            if e["event"] != "undo" and i not in gone and (labeller is None or e["labeller"] == labeller)
        ]

    def effective(self, labeller: str) -> dict[int, int]:
        """pair_id -> this labeller's effective grade (their last grade not undone)."""
        return {int(e["pair_id"]): int(e["grade"]) for _, e in self.active(labeller) if e["event"] == "grade"}

    def by_labeller(self) -> dict[str, dict[int, int]]:
        """labeller -> pair_id -> effective grade, for everyone who has at least one."""
        out: dict[str, dict[int, int]] = {}
        for _, e in self.active():
            if e["event"] == "grade":
                out.setdefault(e["labeller"], {})[int(e["pair_id"])] = int(e["grade"])
        return out

    def human_grades(self) -> dict[int, int]:
        """pair_id -> the pair's human grade: the lower median of its labellers' effective grades.

        The one rule that turns several people's grades into one (the study's estimate and queue use it): two
        people who give 1 and 2 make 1, three who give 0, 2, 3 make 2; a grade nobody gave is never made up."""
        by_pair: dict[int, list[int]] = {}
        for grades in self.by_labeller().values():
            for pid, grade in grades.items():
                by_pair.setdefault(pid, []).append(grade)
        return {pid: sorted(gs)[(len(gs) - 1) // 2] for pid, gs in by_pair.items()}

    def done(self, labeller: str) -> set[int]:
        """Pairs this labeller graded or skipped (not undone): out of their queue."""
        return {int(e["pair_id"]) for _, e in self.active(labeller)}

    def second_opinions(self, labeller: str) -> set[int]:
        """Pairs someone else graded that this labeller has not graded or skipped: what agreement needs."""
        others = {int(e["pair_id"]) for _, e in self.active() if e["event"] == "grade" and e["labeller"] != labeller}
        return others - self.done(labeller)

    def last_active(self, labeller: str) -> tuple[int, dict[str, Any]] | None:
        """The event an undo by this labeller would take back, or None."""
        mine = self.active(labeller)
        return mine[-1] if mine else None

    def labellers(self) -> list[str]:
        return sorted({e["labeller"] for _, e in self.events})


def _check_event(event: dict[str, Any], path: Path, line: int) -> None:
    kind = event.get("event")
    if kind not in EVENTS:
        raise InputError(f"unknown event {kind!r} (expected one of {', '.join(EVENTS)})", path=path, line=line)
    for name in ("pair_id", "labeller"):
        if name not in event:
            raise InputError("missing field", path=path, line=line, field=name)
    if kind == "grade" and (isinstance(event.get("grade"), bool) or not isinstance(event.get("grade"), int)):
        raise InputError("a grade event needs an integer grade", path=path, line=line, field="grade")
    if kind == "undo" and not isinstance(event.get("undoes"), int):
        raise InputError("an undo event needs the line index it undoes", path=path, line=line, field="undoes")


class LabelLog:
    """`STUDY/labels.jsonl`: append (durably), undo, and read back. One instance per server; safe across threads,
    and across processes that write the same study (each append holds `flock`)."""

    def __init__(self, study_dir: str | Path) -> None:
        self.path = Path(study_dir) / LABELS_FILE
        self._lock = threading.Lock()
        # the parsed events up to a byte offset: reading again parses only what was appended since
        self._cache = Labels()
        self._offset = 0
        self._lines = 0

    # -- reading ---------------------------------------------------------------------------------------
    def read(self) -> Labels:
        """Every valid event so far; a torn last line is left out with a note (never an error)."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> Labels:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            self._cache, self._offset, self._lines = Labels(), 0, 0
            return self._copy()
        if size < self._offset:  # replaced by a shorter file (only a torn tail is ever cut): read from the start
            self._cache, self._offset, self._lines = Labels(), 0, 0
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        complete, newline, tail = data.rpartition(b"\n")
        if newline:
            for raw in complete.split(b"\n"):
                line = self._lines + 1
                try:
                    event = json.loads(raw)
                except ValueError as exc:
                    raise InputError(f"malformed event line ({exc})", path=self.path, line=line) from None
                if not isinstance(event, dict):
                    raise InputError("an event line must be a JSON object", path=self.path, line=line)
                _check_event(event, self.path, line)
                self._cache.events.append((self._lines, event))
                self._lines += 1
            self._offset += len(complete) + 1
        self._cache.note = (
            f"{self.path}:{self._lines + 1}: ignored a torn last line ({len(tail)} bytes; a writer was stopped "
            "while writing it, so it was never acknowledged)"
            if tail
            else None
        )
        return self._copy()

    def _copy(self) -> Labels:
        return Labels(list(self._cache.events), self._cache.note)

    # -- writing ---------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The thread lock and an exclusive `flock`; yields an O_APPEND descriptor with any torn tail cut off."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._cut_torn_tail(fd)
                yield fd
            finally:
                os.close(fd)  # closing releases the flock

    def _cut_torn_tail(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        if size == 0:
            return
        with open(self.path, "rb") as fh:
            # the last newline: read backwards in blocks (a line is short; a log can be long)
            end, keep = size, 0
            while end > 0:
                start = max(0, end - 4096)
                fh.seek(start)
                block = fh.read(end - start)
                if (pos := block.rfind(b"\n")) >= 0:
                    keep = start + pos + 1
                    break
                end = start
        if keep < size:
            print(f"{self.path}: cut a torn last line of {size - keep} bytes before appending", file=sys.stderr)
            os.ftruncate(fd, keep)
            os.fsync(fd)

    def _append(self, fd: int, event: dict[str, Any]) -> int:
        """Write one event line and fsync it; returns its line index (call under `_locked`)."""
        index = len(self._refresh().events)
        line = json_line(event).encode("utf-8")
        written = os.write(fd, line)
        if written != len(line):  # a full disk: the partial line is a torn tail the next writer cuts
            raise OSError(f"{self.path}: wrote {written} of {len(line)} bytes")
        os.fsync(fd)
        return index

    def record(
        self, kind: str, pair: dict[str, Any], labeller: str, shown: dict[str, Any], grade: int | None = None
    ) -> tuple[int, dict[str, Any], bool]:
        """Append a grade or skip of `pair` by `labeller`: (line index, event, whether it was already stored).

        Idempotent: the same grade (or a skip) of a pair this labeller already has, not undone, returns the stored
        event (a browser retrying after a lost reply stores nothing twice); a different one is refused: undo first.
        """
        if kind not in ("grade", "skip"):
            raise InputError(f"unknown event {kind!r}", field="event")
        labeller = check_labeller(labeller)
        pair_id = int(pair["pair_id"])
        with self._locked() as fd:
            for index, old in reversed(self._refresh().active(labeller)):
                if int(old["pair_id"]) == pair_id:
                    if old["event"] == kind and old.get("grade") == grade:
                        return index, old, True
                    said = f"graded {old['grade']}" if old["event"] == "grade" else "skipped"
                    raise LabelConflict(
                        f"pair {pair_id} is already {said} by {labeller}; undo it first", field="pair_id"
                    )
            event = {
                "event": kind,
                "pair_id": pair_id,
                "qid": pair["qid"],
                "doc_id": pair["doc_id"],
                "grade": grade,
                "labeller": labeller,
                "at": now_utc(),
                "shown": shown,
                "undoes": None,
            }
            return self._append(fd, event), event, False

    def undo(self, labeller: str) -> tuple[int, dict[str, Any], dict[str, Any]] | None:
        """Take back this labeller's latest grade or skip: (undo's line index, the undo event, the event undone),
        or None when there is nothing left to undo."""
        labeller = check_labeller(labeller)
        with self._locked() as fd:
            target = self._refresh().last_active(labeller)
            if target is None:
                return None
            index, old = target
            event = {
                "event": "undo",
                "pair_id": old["pair_id"],
                "qid": old["qid"],
                "doc_id": old["doc_id"],
                "grade": None,
                "labeller": labeller,
                "at": now_utc(),
                "shown": old.get("shown"),
                "undoes": index,
            }
            return self._append(fd, event), event, old


def read_labels(study_dir: str | Path) -> Labels:
    """The events of `STUDY/labels.jsonl` (none when it does not exist yet)."""
    return LabelLog(study_dir).read()


def _relevant_from(study_dir: Path) -> int:
    try:
        study = json.loads((study_dir / "study.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 1
    value = study.get("relevant_from", 1) if isinstance(study, dict) else 1
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def agreement_between(first: dict[int, int], second: dict[int, int], relevant_from: int = 1) -> dict[str, Any]:
    """Agreement of two people's effective grades on the pairs both graded: n, exact share, binary kappa."""
    common = sorted(first.keys() & second.keys())
    a = np.array([first[p] for p in common], dtype=np.int64)
    b = np.array([second[p] for p in common], dtype=np.int64)
    return {
        "n": len(common),
        "exact": float(np.mean(a == b)) if common else None,
        "kappa": kappa((a >= relevant_from).astype(np.int64), (b >= relevant_from).astype(np.int64)),
        "relevant_from": relevant_from,
    }


def agreement_summary(study_dir: str | Path) -> dict[str, Any]:
    """Who labelled how many pairs, and Cohen's kappa for every two labellers who graded common pairs.

    JSON-able; what the labelling page shows and `retbench label status` can print. `relevant_from` comes from
    study.json when it sets one (else 1)."""
    study_dir = Path(study_dir)
    labels = read_labels(study_dir)
    people = labels.by_labeller()
    cut = _relevant_from(study_dir)
    pairs = []
    for a, b in combinations(sorted(people), 2):
        row = agreement_between(people[a], people[b], cut)
        if row["n"]:
            pairs.append({"a": a, "b": b, **row})
    return {
        "labellers": {name: len(grades) for name, grades in sorted(people.items())},
        "pairs": pairs,
        "relevant_from": cut,
        "note": labels.note,
    }
