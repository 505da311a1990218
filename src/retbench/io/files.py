"""Reading and writing files: the one reader (plain or gzip, errors that name the file and line) and the one writer.

Every reader goes through here so a truncated .gz, a missing file or a bad JSON line reads the same
way whichever format it came from.

Every file retbench writes goes through the writer below, which does three things for all of them:

- atomic: a whole file is written to a temporary file beside it, flushed and fsynced, then renamed
  over the old one, so a kill mid-write leaves the previous version (or nothing), never half a file
  that a reader would accept; an append-only log (`AppendLog`: call logs, caches) writes one whole
  line per record and flushes it, so a kill loses at most the line being written (readers skip it);
- strict JSON: no NaN or Infinity (`json_safe`), so any strict parser reads every JSON file;
- redacted: `secrets.redact` runs over the full text before it reaches the disk, so a key echoed in
  an error body, an LLM answer or a report never lands verbatim.
"""

from __future__ import annotations

import errno
import gzip
import io
import json
import math
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from retbench.errors import ConfigError, InputError, OutputError
from retbench.secrets import redact

if TYPE_CHECKING:
    import yaml


def require_file(path: str | Path, what: str = "file") -> Path:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} not found", path=p)
    if not p.is_file():
        raise InputError(f"{what} is not a regular file", path=p)
    return p


def small_file(path: Path, limit: int) -> bool:
    """Whether `path` is a plain file of fewer than `limit` bytes (a `.gz` file's text size is unknown: never)."""
    try:
        return path.suffix != ".gz" and path.stat().st_size < limit
    except OSError:
        return False  # the reader reports the file's own error


class _OwningGzipFile(gzip.GzipFile):
    """A GzipFile writing into a file it owns: GzipFile leaves a file given as `fileobj` open, so the file (and the
    last bytes in its buffer) would wait for the garbage collector; this one closes it with itself."""

    def __init__(self, raw: IO[bytes]) -> None:
        # filename "" and mtime 0: the header names no file and no time, so the output is byte-stable across runs
        super().__init__(filename="", mode="wb", fileobj=raw, mtime=0)
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_text(path: str | Path, mode: str = "rt") -> IO[str]:
    """Open a text file for reading or writing; `.gz` files are (de)compressed transparently."""
    p = Path(path)
    if "r" in mode:
        require_file(p)
    if p.suffix == ".gz":
        if "w" in mode:
            return io.TextIOWrapper(_OwningGzipFile(open(p, "wb")), encoding="utf-8", newline="\n")
        return gzip.open(p, mode, encoding="utf-8-sig")  # type: ignore[return-value]
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


def field_rows(path: str | Path, what: str, layout: str, *, comments: bool = False) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, fields) of a whitespace-separated file whose every row has `layout`'s fields
    (e.g. "query group doc grade"): blank lines, and with `comments` lines whose first field starts with `#`
    (trec_eval 10.0's comment lines), are skipped; a row of another width is one error naming the file and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what}: {exc}", path=p) from None
    width = len(layout.split())
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or (comments and fields[0].startswith("#")):
            continue
        if len(fields) != width:
            raise InputError(f"expected {width} fields ({layout}), got {len(fields)}", path=p, line=lineno)
        yield lineno, fields


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


def appended_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of an append-only log (a cache, a call log), one a line; a line cut by a kill is skipped."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                yield rec


def json_safe(obj: object) -> Any:
    """The one NaN/Infinity policy: NaN and infinities become None (JSON has neither), numpy scalars plain
    numbers, tuples lists.

    Every JSON file retbench writes goes through here and `json.dumps(..., allow_nan=False)`, so a
    strict parser reads all of them. A mean over no counted query is null, not NaN; an unbounded
    statistic (an effect size over deltas that do not vary) is null too: readers treat null as "no
    finite value" and every renderer already prints it as a dash.
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    item = getattr(obj, "item", None)  # numpy scalars
    if item is not None and getattr(obj, "shape", None) == ():
        return json_safe(item())
    return obj


# ---- the writer -----------------------------------------------------------------------------------


def _tmp_beside(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def os_reason(exc: OSError) -> str:
    """What a file-system error means for the person who gave the path (the CLI says it for reads too)."""
    if isinstance(exc, IsADirectoryError):
        return "is a directory, expected a file"
    if isinstance(exc, NotADirectoryError):
        return "a part of this path is a file, expected a directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileExistsError):
        return "already exists and is not a directory"
    return exc.strerror or (os.strerror(exc.errno) if exc.errno else type(exc).__name__)


def write_failed(path: Path, exc: OSError, kept: str = "the previous version, if any, is kept") -> OutputError:
    """The one error for a file that could not be written: the file asked for and the system's reason
    (`No space left on device`, `File too large`), never the temporary file the failure happened in."""
    if exc.errno:
        reason = f"{os_reason(exc)} [{errno.errorcode.get(exc.errno, exc.errno)}]"
    else:  # NumPy's short write ("18767 requested and 4968 written") carries no errno
        reason = f"{exc or type(exc).__name__} (a short write: the disk is full or a file size limit was reached)"
    return OutputError(f"could not write this file: {reason}; {kept}", path=path)


def _while_writing(exc: OSError, path: Path, tmp: Path | None) -> bool:
    """Whether `exc` came from writing `path` (its folder, its temporary file, or a write with no file
    named, as ENOSPC is), not from a file the caller read inside the block."""
    named = exc.filename
    return named is None or Path(named) == tmp or Path(named) in (path, *path.parents)


def replace_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Call `write(tmp)` for a temporary path beside `path`, fsync it, then rename it over `path`.

    For formats with their own writer (TREC runs, TSV tables, arrays) whose content holds no free text.
    A failed write (disk full, file size limit) removes the temporary file, leaves the old `path` as it
    was, and raises `OutputError` naming `path`.
    """
    path = Path(path)
    tmp: Path | None = None
    try:
        tmp = _tmp_beside(path)
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if not _while_writing(exc, path, tmp):
            raise
        raise write_failed(path, exc) from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def save_array(path: Path, array: Any) -> None:
    """A NumPy array as a `.npy` file, atomically (saved through an open file: `np.save` adds `.npy` to a name)."""
    import numpy as np

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.save(fh, array)

    replace_atomically(path, write)


@contextmanager
def atomic_text(path: Path) -> Iterator[IO[str]]:
    """A text file handle whose content replaces `path` only when the block ends without error.

    The caller redacts what it writes (`json_line`, `redact`); prefer `write_text` / `write_jsonl`.
    A failed write removes the temporary file and raises `OutputError` naming `path`.
    """
    path = Path(path)
    tmp: Path | None = None
    try:
        tmp = _tmp_beside(path)
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if not _while_writing(exc, path, tmp):
            raise
        raise write_failed(path, exc) from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def dumps(obj: object, *, indent: int | None = 2, ensure_ascii: bool = True) -> str:
    """Strict, redacted JSON text of `obj` with a final newline (non-finite floats become null)."""
    text = json.dumps(json_safe(obj), indent=indent, default=str, allow_nan=False, ensure_ascii=ensure_ascii)
    return redact(text) + "\n"


def json_line(obj: object, *, ensure_ascii: bool = False) -> str:
    """One record of a JSON Lines file: strict, redacted, on one line, newline-terminated."""
    return dumps(obj, indent=None, ensure_ascii=ensure_ascii)


def write_json(path: Path, obj: object, *, indent: int | None = 2, ensure_ascii: bool = True) -> None:
    """Write strict, redacted JSON atomically (temp file + rename) so a kill never leaves half a file."""
    text = dumps(obj, indent=indent, ensure_ascii=ensure_ascii)
    with atomic_text(path) as fh:
        fh.write(text)


def write_jsonl(path: Path, records: Iterable[object], *, ensure_ascii: bool = False) -> None:
    """Write a whole JSON Lines file (one strict, redacted object a line) atomically."""
    with atomic_text(path) as fh:
        for rec in records:
            fh.write(json_line(rec, ensure_ascii=ensure_ascii))


def write_text(path: Path, text: str) -> None:
    """Write a text file (a report: Markdown, HTML, a TSV) atomically, redacted."""
    text = redact(text)
    with atomic_text(path) as fh:
        fh.write(text)


class AppendLog:
    """An append-only JSON Lines file (a call log, a cache): one strict, redacted line per record.

    Each record is written whole in one `write` and flushed, under a lock, so threads never
    interleave and a kill cuts at most the last line (which `appended_records` skips). `path=None`
    makes a log that records nothing (a dry run).
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.lock = threading.Lock()
        self._ready = False  # the folder is made at the first record: opening a log writes nothing

    def write(self, record: object) -> None:
        if self.path is None:
            return
        line = json_line(record)
        with self.lock:
            if not self._ready:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._ready = True
            try:
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(line)
                    fh.flush()
            except OSError as exc:  # a cut line is skipped by readers; the person learns which file is full
                raise write_failed(self.path, exc, "records already written are kept") from None


def find_variant(folder: Path, stem: str) -> Path | None:
    """`stem` or `stem.gz` inside folder, whichever exists; both at once are refused, naming both, since which
    one holds the data cannot be told (a file gzipped beside its original, then edited, differs silently)."""
    found = [cand for cand in (folder / stem, folder / f"{stem}.gz") if cand.is_file()]
    if len(found) > 1:
        raise InputError(
            f"both {found[0].name} and {found[1].name} are here, so which one to read is ambiguous: remove or "
            "rename one",
            path=folder,
        )
    return found[0] if found else None


# Alias expansion allowed in one YAML document: nodes that `*alias` references add once expanded. Anchors
# that share settings between a few systems add hundreds; a "billion laughs" document adds millions.
MAX_ALIAS_NODES = 100_000


def _expanded_size(root: yaml.Node, path: Path | str) -> int:
    """Nodes in the document once every alias is expanded (each distinct node is walked once)."""
    import yaml

    size: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        if done:
            size[key] = 1 + sum(size[id(c)] for c in children)
            open_nodes.discard(key)
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise ConfigError(
                "a YAML alias refers to itself (recursive document)", path=path, line=node.start_mark.line + 1
            )
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
    return size[id(root)]


def load_yaml_text(text: str, path: Path | str, loader: type[yaml.SafeLoader] | None = None) -> Any:
    """Parse YAML with a bound on alias expansion; errors name the file and line.

    PyYAML's safe loader still expands aliases without limit: a 400-byte document of nested
    aliases becomes millions of nodes. The document is composed first (aliases stay shared), its
    expanded size counted, and only then constructed.
    """
    import yaml

    try:
        ldr = (loader or yaml.SafeLoader)(text)
        try:
            node = ldr.get_single_node()
            if node is None:
                return None
            distinct: set[int] = set()
            todo = [node]
            while todo:
                n = todo.pop()
                if id(n) in distinct:
                    continue
                distinct.add(id(n))
                if isinstance(n, yaml.MappingNode):
                    todo.extend(x for pair in n.value for x in pair)
                elif isinstance(n, yaml.SequenceNode):
                    todo.extend(n.value)
            added = _expanded_size(node, path) - len(distinct)
            if added > MAX_ALIAS_NODES:
                raise ConfigError(
                    f"YAML aliases expand to {added:,} more nodes (limit {MAX_ALIAS_NODES:,}); "
                    "write the repeated settings out or share fewer of them",
                    path=path,
                )
            return ldr.construct_document(node)
        finally:
            ldr.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"malformed YAML ({getattr(exc, 'problem', exc)})", path=path, line=mark.line + 1 if mark else None
        ) from None


def read_yaml(path: str | Path) -> Any:
    """A YAML file's content; a syntax error names the file and line (every config loader uses this)."""
    p = require_file(path, "config file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start}: {exc.reason})", path=p) from None
    return load_yaml_text(text, p)
