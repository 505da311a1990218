"""Opening text files, plain or gzip, with errors that name the file and line.

Every reader goes through here so a truncated .gz, a missing file or a bad JSON line reads the same
way whichever format it came from.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from retbench.errors import ConfigError, InputError


def require_file(path: str | Path, what: str = "file") -> Path:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} not found", path=p)
    if not p.is_file():
        raise InputError(f"{what} is not a regular file", path=p)
    return p


def open_text(path: str | Path, mode: str = "rt") -> IO[str]:
    """Open a text file for reading or writing; `.gz` files are (de)compressed transparently."""
    p = Path(path)
    if "r" in mode:
        require_file(p)
    if p.suffix == ".gz":
        if "w" in mode:
            # mtime=0 keeps compressed outputs byte-stable across runs
            raw = gzip.GzipFile(filename="", mode="wb", fileobj=open(p, "wb"), mtime=0)  # noqa: SIM115
            return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
        return gzip.open(p, mode, encoding="utf-8-sig")
    # reading with utf-8-sig drops a byte-order mark at the start (never part of an id), as Arrow does
    return open(p, mode, encoding="utf-8-sig" if "r" in mode else "utf-8", newline="\n" if "w" in mode else None)


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its newline), translating decode and gzip errors."""
    p = Path(path)
    lineno = 0
    try:
        with open_text(p) as fh:
            for lineno, line in enumerate(fh, start=1):
                yield lineno, line.rstrip("\r\n")
    except EOFError as exc:
        raise InputError(f"compressed file is truncated ({exc})", path=p, line=lineno + 1) from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"not a valid gzip file ({exc})", path=p, line=lineno + 1) from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not valid UTF-8 ({exc.reason})", path=p, line=_first_undecodable_line(p) or lineno + 1
        ) from None


def _first_undecodable_line(p: Path) -> int | None:
    """The line that is not UTF-8 (text mode decodes ahead of the line it hands out, so it cannot say)."""
    with gzip.open(p, "rb") if p.suffix == ".gz" else open(p, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return lineno
    return None


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSON Lines file."""
    loads = json.loads
    for lineno, line in iter_lines(path):
        if not line or line.isspace():
            continue
        try:
            obj = loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON ({exc.msg} at column {exc.colno})", path=path, line=lineno) from None
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=lineno)
        yield lineno, obj


def find_variant(folder: Path, stem: str) -> Path | None:
    """`stem` or `stem.gz` inside folder, whichever exists."""
    for cand in (folder / stem, folder / f"{stem}.gz"):
        if cand.is_file():
            return cand
    return None


def read_yaml(path: str | Path) -> Any:
    """A YAML file's content; a syntax error names the file and line (every config loader uses this)."""
    import yaml

    p = require_file(path, "config file")
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"malformed YAML ({getattr(exc, 'problem', exc)})", path=p, line=mark.line + 1 if mark else None
        ) from None
