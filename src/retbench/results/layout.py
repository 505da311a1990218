"""Where each file of a results directory lives."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


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
            done = json.loads(self.done.read_text())
        except (json.JSONDecodeError, OSError, UnicodeDecodeError):
            return False  # unreadable: the system is redone
        return isinstance(done, dict) and done.get("config_hash") == config_hash
