"""Which reader a trace file needs, and the one entry that reads many files: `read_traces`.

Formats: `otlp` (OTLP/JSON, one request per file or per line, or OTLP protobuf `.pb`/`.binpb`), `phoenix`,
`langfuse` (their REST exports; their SDKs also write OTLP, which `otlp` reads and names by the
instrumentation scope) and `jsonl` (plain logs). `auto` decides per file from its content: a
`resourceSpans` request is OTLP, a span with a `context` is Phoenix's, an observation with a `type` is
Langfuse's, a line with a `query` is a plain log. A file that is none of these is an input error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from retbench.errors import InputError
from retbench.io.files import iter_lines, open_text, require_file
from retbench.io.traces.model import Problem, ReadOut
from retbench.io.traces.otlp import get, read_protobuf, read_request
from retbench.io.traces.plain import JSONL, read_plain
from retbench.io.traces.platforms import LANGFUSE, PHOENIX, attach_scores, looks_like, read_record, records

OTLP = "otlp"
FORMATS = ("auto", OTLP, PHOENIX, LANGFUSE, JSONL)
PROTOBUF_SUFFIXES = (".pb", ".binpb", ".protobuf")


def _kind(obj: Any) -> str | None:
    """The format one parsed JSON value belongs to (None: unknown)."""
    if isinstance(obj, Mapping) and get(obj, "resourceSpans") is not None:
        return OTLP
    if isinstance(obj, Mapping) and "query" in obj and "retrieved" in obj:
        return JSONL
    found = looks_like(obj)
    if found:
        return found
    items = records(obj)
    if items is not None:
        return next((k for k in map(looks_like, items) if k), PHOENIX if not items else None)
    return None


def _records_or_self(obj: Any) -> list[Any]:
    """The records of an export page (possibly none), or the object itself when it is one record."""
    items = records(obj)
    return [obj] if items is None else items


def _check(path: Path, asked: str, found: str) -> str:
    # the platforms' SDKs export OTLP, so `--format phoenix|langfuse` on an OTLP file is what they wrote
    if asked not in ("auto", found) and not (found == OTLP and asked in (PHOENIX, LANGFUSE)):
        raise InputError(f"--format {asked}, but the file reads as {found}", path=path)
    return found


def read_file(path: str | Path, fmt: str = "auto", id_key: str = "id") -> ReadOut:
    """Every span of one file: retrievals, other kinds counted, malformed spans as Problems."""
    if fmt not in FORMATS:
        raise InputError(f"unknown trace format {fmt!r} (one of {', '.join(FORMATS)})", field="format")
    p = require_file(path, "trace file")
    out, file = ReadOut(), str(p)
    if p.suffix in PROTOBUF_SUFFIXES:
        out.formats[file] = _check(p, fmt, OTLP)
        read_protobuf(p, id_key, out)
        return out
    with open_text(p) as fh:
        text = fh.read()
    try:
        whole: Any = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # JSON Lines (or not JSON at all)
    found = None if whole is None else _kind(whole)
    if whole is not None and found is None:
        raise InputError("not a trace export: no OTLP resourceSpans, Phoenix spans or Langfuse observations", path=p)
    if found == OTLP:
        out.formats[file] = _check(p, fmt, found)
        read_request(whole, file, id_key, out)
        return out
    if found in (PHOENIX, LANGFUSE):
        out.formats[file] = _check(p, fmt, found)
        for record in _records_or_self(whole):
            read_record(record, found, file, id_key, out)
        if found == LANGFUSE:
            attach_scores(whole, out.retrievals, file, out)
        return out
    return _read_lines(p, fmt, id_key, out)


def _read_lines(p: Path, fmt: str, id_key: str, out: ReadOut) -> ReadOut:
    file, found = str(p), None
    for _, line in iter_lines(p):
        try:
            found = _kind(json.loads(line))
        except json.JSONDecodeError:
            continue
        if found:
            break
    if found is None:
        raise InputError("not a trace export: no line holds an OTLP request, a span, an observation or a query", path=p)
    out.formats[file] = _check(p, fmt, found)
    if found == JSONL:
        read_plain(file, id_key, out)
        return out
    for lineno, line in iter_lines(p):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            out.problems.append(
                Problem(file, None, "line", f"malformed JSON ({exc.msg} at column {exc.colno})", lineno)
            )
            continue
        if found == OTLP:
            read_request(obj, file, id_key, out, lineno)
        else:
            for record in _records_or_self(obj):
                read_record(record, found, file, id_key, out, lineno)
    return out


def read_traces(paths: Iterable[str | Path], fmt: str = "auto", id_key: str = "id") -> ReadOut:
    """Every span of every file, in file order then span order."""
    out = ReadOut()
    for path in paths:
        out.extend(read_file(path, fmt, id_key))
    out.fold_nested()
    return out
