"""Where each file of a results directory lives: the one key -> folder rule, used by writer and reader.

A cell (one system on one dataset split) has a key: the system's name when the study has one
dataset, else `<dataset>/<system>`, where `<dataset>` is the dataset's label, or `<label>.<split>`
when the same label appears with more than one split. Its folder is `systems/<key>` with each
`/`-separated part one folder, so `scifact/bm25` lives in `systems/scifact/bm25`, for `retbench run`,
`report`, `compare` and `gate` alike. Keys are checked unique when a config is read.

An output directory is held by one process at a time: `OutputLock` takes an exclusive `flock` on
`.retbench.lock` (released by the kernel when the process dies, even by SIGKILL) and names the
holder's pid to anyone else who tries.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from types import TracebackType

from retbench.errors import ConfigError, InputError

SYSTEMS = "systems"
LOCK_NAME = ".retbench.lock"


@dataclass
class SystemDir:
    """Paths of one cell's results."""

    root: Path

    @classmethod
    def of(cls, out: str | Path, key: str) -> SystemDir:
        """The folder of the cell `key` in the results directory `out` (the one rule)."""
        parts = key.split("/")
        if not all(p and p not in (".", "..") for p in parts):
            raise InputError(f"not a valid results key {key!r}", path=out, field="system")
        return cls(Path(out, SYSTEMS, *parts))

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

    @property
    def judged(self) -> Path:
        """The judge's verdicts per query (studies/judging.py writes it; the report's drill-down reads it)."""
        return self.root / "judged.json"

    @property
    def answers(self) -> Path:
        """The answer side of each query (RAG systems), in the system-outputs format."""
        return self.root / "answers.jsonl"

    def is_done(self, config_hash: str) -> bool:
        if not self.done.is_file():
            return False
        try:
            done = json.loads(self.done.read_text())
        except (json.JSONDecodeError, OSError, UnicodeDecodeError):
            return False  # unreadable: the system is redone
        return isinstance(done, dict) and done.get("config_hash") == config_hash


def dataset_parts(labels: Sequence[tuple[str, str]], source: str = "<config>") -> list[str]:
    """The dataset part of each (label, split)'s keys; the same (label, split) twice is a config error."""
    seen: dict[tuple[str, str], int] = {}
    for i, pair in enumerate(labels):
        if pair in seen:
            raise ConfigError(
                f"dataset {pair[0]!r} split {pair[1]!r} is listed twice (as datasets[{seen[pair]}] too): "
                "their results would share one folder",
                path=source,
                field=f"datasets[{i}]",
            )
        seen[pair] = i
    splits: dict[str, set[str]] = {}
    for label, split in labels:
        splits.setdefault(label, set()).add(split)
    return [f"{label}.{split}" if len(splits[label]) > 1 else label for label, split in labels]


def cell_keys(labels: Sequence[tuple[str, str]], systems: Sequence[str], source: str = "<config>") -> list[list[str]]:
    """keys[i][j]: the key of system j on dataset i (see the module docstring)."""
    parts = dataset_parts(labels, source)
    if len(parts) == 1:
        return [list(systems)]
    return [[f"{d}/{s}" for s in systems] for d in parts]


def split_key(key: str) -> tuple[str, str]:
    """(dataset part, system) of a cell key; the dataset part is "" in a one-dataset study."""
    group, _, system = key.rpartition("/")
    return group, system


def all_pairs(systems: Sequence[str], baseline: str | None = None) -> list[tuple[str, str]]:
    """Every pair in order, or each system against `baseline`.

    Systems of a multi-dataset results directory (`<dataset>/<system>`) are paired only within
    their dataset (different datasets share no query), unless that leaves no pair at all.
    """
    if baseline is not None:
        if baseline not in systems:
            raise InputError(f"baseline system {baseline!r} not found (have: {', '.join(systems)})", field="baseline")
        return paired_with(systems, baseline)
    pairs = list(combinations(systems, 2))
    return [(a, b) for a, b in pairs if split_key(a)[0] == split_key(b)[0]] or pairs


def paired_with(names: Sequence[str], baseline: str) -> list[tuple[str, str]]:
    """(base, system) pairs that compare systems on the same dataset only.

    On the baseline's dataset every system is paired with the baseline; on every other dataset with
    the system of the same name as the baseline (else that dataset's first system).
    """
    base_group, base_system = split_key(baseline)
    bases: dict[str, str] = {}
    for n in names:
        bases.setdefault(split_key(n)[0], n)
    for n in names:
        if split_key(n)[1] == base_system:
            bases[split_key(n)[0]] = n
    bases[base_group] = baseline
    return [(bases[split_key(n)[0]], n) for n in names if n != bases[split_key(n)[0]]]


def comparison_pairs(names: Sequence[str], baseline: str | None, per_dataset: bool) -> list[tuple[str, str]]:
    """(baseline, other) pairs a report compares: every system against the baseline, within each dataset when
    there are several.

    With several datasets (keys "<dataset>/<system>") `baseline` names a system (or one full key's system);
    queries of different datasets are never paired. An unknown baseline gives no pairs.
    """
    if not per_dataset:
        base = baseline or names[0]
        return [(base, s) for s in names if s != base] if base in names else []
    groups: dict[str, list[str]] = {}
    for key in names:
        groups.setdefault(split_key(key)[0], []).append(key)
    system = split_key(baseline)[1] if baseline and "/" in baseline else baseline
    pairs = []
    for keys in groups.values():
        first: str | None = next((k for k in keys if split_key(k)[1] == system), None) if system else keys[0]
        if first is not None:
            pairs += [(first, k) for k in keys if k != first]
    return pairs


class OutputLock:
    """An exclusive lock on an output directory for the life of a study (see the module docstring)."""

    def __init__(self, out: str | Path) -> None:
        self.path = Path(out) / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise InputError(
                f"another retbench process (pid {holder}) is writing to this directory; wait for it or use another output",
                path=self.path,
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None
