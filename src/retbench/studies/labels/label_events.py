"""Reading a study's `labels.jsonl` (the people's grades) by the study contract's rules.

The log is append-only and written only by the label log (`retbench.studies.labels.log`, the labelling
page's module); this reader applies the same rules so the estimate needs nothing else: one event a line
({"event": "grade"|"skip"|"undo", "pair_id", "grade", "labeller", "undoes": line index}); a labeller's
effective label for a pair is their last grade event not undone; skips are not labels; a truncated last
line (a killed writer) is ignored with a note, a malformed line elsewhere is an error naming the line.
Across labellers the pair's human grade is the lower median of their effective grades (two people who
disagree between 1 and 2 give 1: a grade nobody gave is never made up).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from retbench.errors import InputError

LABELS_FILE = "labels.jsonl"


@dataclass
class LabelEvents:
    """Effective grades per labeller, the pairs each skipped, and notes (a cut last line)."""

    grades: dict[str, dict[int, int]] = field(default_factory=dict)  # labeller -> pair_id -> grade
    skipped: dict[str, set[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def human_grades(self) -> dict[int, int]:
        """pair_id -> the lower median of the labellers' effective grades."""
        by_pair: dict[int, list[int]] = {}
        for labels in self.grades.values():
            for pid, g in labels.items():
                by_pair.setdefault(pid, []).append(g)
        return {pid: sorted(gs)[(len(gs) - 1) // 2] for pid, gs in by_pair.items()}

    def seen_by(self, labeller: str) -> set[int]:
        """Pairs this labeller graded or skipped (not shown to them again)."""
        return set(self.grades.get(labeller, {})) | self.skipped.get(labeller, set())


def read_label_events(study_dir: str | Path) -> LabelEvents:
    """The effective labels of `STUDY/labels.jsonl` (empty when no one has labelled yet)."""
    path = Path(study_dir) / LABELS_FILE
    out = LabelEvents()
    if not path.is_file():
        return out
    lines = path.read_text(encoding="utf-8").split("\n")
    events: list[dict | None] = []
    for i, line in enumerate(lines):
        if not line.strip():
            events.append(None)
            continue
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # no newline after it: a writer was killed mid-line
                out.notes.append(f"{path}:{i + 1}: a cut last line was ignored")
                events.append(None)
                continue
            raise InputError("malformed JSON line", path=path, line=i + 1) from None
        if not isinstance(ev, dict) or ev.get("event") not in ("grade", "skip", "undo"):
            raise InputError("expected an object with event grade, skip or undo", path=path, line=i + 1, field="event")
        events.append(ev)
    undone = {int(ev["undoes"]) for ev in events if ev and ev["event"] == "undo" and ev.get("undoes") is not None}
    for i, ev in enumerate(events):
        if ev is None or i in undone or ev["event"] == "undo":
            continue
        who, pid = str(ev.get("labeller") or ""), ev.get("pair_id")
        if not isinstance(pid, int):
            raise InputError("pair_id must be an integer", path=path, line=i + 1, field="pair_id")
        if ev["event"] == "skip":
            out.skipped.setdefault(who, set()).add(pid)
            continue
        if not isinstance(ev.get("grade"), int):
            raise InputError("a grade event needs an integer grade", path=path, line=i + 1, field="grade")
        out.grades.setdefault(who, {})[pid] = int(ev["grade"])
        out.skipped.get(who, set()).discard(pid)
    return out
