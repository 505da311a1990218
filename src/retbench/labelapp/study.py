"""What the page reads from a study folder: study.json and the pooled pairs (pairs.jsonl), reread when replaced.

`retbench label prelabel` and `label next` rewrite pairs.jsonl atomically (a new file renamed over the old),
so a running page notices a new file by its inode, size or modification time and reads it again: a person
always grades the pair as the file now says it, and the label records the fingerprint of the text shown.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from retbench.errors import InputError
from retbench.io.files import iter_jsonl, require_file


class StudyFiles:
    """study.json and pairs.jsonl of one study, cached until either file changes on disk."""

    def __init__(self, study_dir: str | Path) -> None:
        self.dir = Path(study_dir)
        require_file(self.dir / "study.json", "study file (make one with `retbench label init`)")
        require_file(self.dir / "pairs.jsonl", "pairs file (make one with `retbench label init`)")
        self._lock = threading.Lock()
        self._stamp: tuple[tuple[int, int, int], ...] = ()
        self._study: dict[str, Any] = {}
        self._pairs: list[dict[str, Any]] = []

    def _load(self) -> None:
        paths = (self.dir / "study.json", self.dir / "pairs.jsonl")
        stamp = tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in map(os.stat, paths))
        if stamp == self._stamp:
            return
        try:
            study = json.loads(paths[0].read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InputError(f"malformed JSON ({exc})", path=paths[0]) from None
        if not isinstance(study, dict):
            raise InputError("expected a JSON object", path=paths[0])
        pairs = []
        for line, pair in iter_jsonl(paths[1]):
            if pair.get("pair_id") != len(pairs):
                raise InputError(f"pair_id must be the line's index ({len(pairs)})", path=paths[1], line=line)
            for name in ("qid", "doc_id", "query", "doc_text"):
                if not isinstance(pair.get(name), str):
                    raise InputError("missing or not text", path=paths[1], line=line, field=name)
            pairs.append(pair)
        self._study, self._pairs, self._stamp = study, pairs, stamp

    def study(self) -> dict[str, Any]:
        with self._lock:
            self._load()
            return self._study

    def pairs(self) -> list[dict[str, Any]]:
        with self._lock:
            self._load()
            return self._pairs

    def scale(self) -> list[int]:
        """The grades a person may give (study.json "scale", default 0..3)."""
        scale = self.study().get("scale") or [0, 1, 2, 3]
        return [int(g) for g in scale]
