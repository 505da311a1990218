"""A run's two files: the TREC text (the interchange) and its columnar copy beside it (`run.trec` -> `run.arrow`).

Every run retbench writes goes through `write_run_files`; readers of a results folder go through `read_beside`,
which takes the copy while it is newer than the text (someone who edits or replaces `run.trec` by hand gets
what they wrote), else the text. Either file alone is a complete run file (`io.run_columns`).
"""

from __future__ import annotations

from pathlib import Path

from retbench.data import Run
from retbench.io.files import replace_atomically
from retbench.io.run_columns import write_run_columns
from retbench.io.trec import read_run, write_run

#: the suffix of the columnar copy written beside a TREC run (`run.trec` -> `run.arrow`)
COPY_SUFFIX = ".arrow"


def copy_path(text_path: str | Path) -> Path:
    """Where the columnar copy of a TREC run file lives: beside it, `.arrow` for its suffix."""
    return Path(text_path).with_suffix(COPY_SUFFIX)


def write_run_files(run: Run, path: str | Path, tag: str | None = None) -> Path:
    """The TREC text at `path` (the interchange) and its columnar copy beside it (`copy_path`), each
    atomically, text first: a copy older than its text is never read for it (`read_beside`)."""
    p = Path(path)
    replace_atomically(p, lambda tmp: write_run(run, tmp, tag=tag))
    copy = copy_path(p)
    write_run_columns(run, copy, tag=tag)
    return copy


def read_beside(text_path: str | Path, name: str | None = None) -> Run:
    """A TREC run file read through its columnar copy when one lies beside it and is newer than it.

    Strictly newer: file times tick coarsely (a few milliseconds), so a text rewritten in the tick its copy was
    written would otherwise pass for unchanged; a small run written in one tick is read from its text (a
    millisecond), a large one takes longer than a tick to write, so its copy is newer and is read."""
    p = Path(text_path)
    copy = copy_path(p)
    try:
        fresh = copy != p and copy.stat().st_mtime_ns > p.stat().st_mtime_ns
    except OSError:
        fresh = False
    return read_run(copy if fresh else p, name=name)
