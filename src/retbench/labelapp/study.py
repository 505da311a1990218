"""What the page reads from a study folder (the study's own `read_study`), read again whenever it is replaced.

`retbench label prelabel` and `label next` (and the queue fixed on the first `next_pairs`) rewrite pairs.jsonl
atomically, a new file renamed over the old, so a running page notices a new file by its inode, size or
modification time and reads it again: a person always grades the pair as the file now says it, and the label
records the fingerprint of the text shown.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from retbench.errors import InputError
from retbench.studies.labels.study import PAIRS_FILE, STUDY_FILE, Study, read_study


class StudyFiles:
    """study.json and pairs.jsonl of one study, cached until either file changes on disk."""

    def __init__(self, study_dir: str | Path) -> None:
        self.dir = Path(study_dir)
        self._lock = threading.Lock()
        self._stamp: tuple[tuple[int, int, int], ...] = ()
        self._study: Study | None = None
        self._load()  # a folder that is no study is an error at start, not on the first request

    def _load(self) -> Study:
        paths = (self.dir / STUDY_FILE, self.dir / PAIRS_FILE)
        try:
            stamp = tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in map(os.stat, paths))
        except FileNotFoundError as exc:
            raise InputError("not a label study: create one with `retbench label init`", path=exc.filename) from None
        if self._study is None or stamp != self._stamp:
            study = read_study(self.dir)
            for line, pair in enumerate(study.pairs, start=1):
                for name in ("qid", "doc_id", "query", "doc_text"):
                    if not isinstance(pair.get(name), str):
                        raise InputError("missing or not text", path=paths[1], line=line, field=name)
            self._study, self._stamp = study, stamp
        return self._study

    def study(self) -> dict[str, Any]:
        with self._lock:
            return self._load().meta

    def pairs(self) -> list[dict[str, Any]]:
        with self._lock:
            return self._load().pairs

    def scale(self) -> list[int]:
        """The grades a person may give (study.json "scale", default 0..3)."""
        scale = self.study().get("scale") or [0, 1, 2, 3]
        return [int(g) for g in scale]
