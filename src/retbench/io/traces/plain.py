"""Plain JSON Lines logs: one retriever call a line, for systems without OpenTelemetry.

    {"query": "what is bm25", "retrieved": [{"id": "d1", "score": 12.5, "text": "..."}, "d7", ["d3", 4.0]],
     "timestamp": "2026-05-01T12:00:00Z", "session": "s1", "user": "u1", "id": "req-42", "trace_id": "t9",
     "feedback": [{"kind": "thumbs", "value": 1}, {"kind": "click", "value": true, "doc_id": "d7"}]}

`query` and `retrieved` (served order) are required; a retrieved entry is an object (`id`, optional
`score`, `text`, `metadata`), a bare id, or an `[id, score]` pair. `timestamp` is ISO-8601 (no zone
means UTC) or seconds since 1970. The record's span id is its `id`, else `line N`. A line that is not a
JSON object is one malformed record, named by its line; the rest of the file still reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from retbench.io.files import iter_lines
from retbench.io.traces.model import (
    Document,
    Feedback,
    Malformed,
    Problem,
    ReadOut,
    Retrieval,
    document,
    text_field,
    timestamp,
)

JSONL = "jsonl"


def _retrieved(value: Any, id_key: str) -> list[Document]:
    if not isinstance(value, list):
        raise Malformed("retrieved", "missing" if value is None else f"expected a list, got {type(value).__name__}")
    docs = []
    for i, item in enumerate(value):
        where = f"retrieved.{i}"
        if isinstance(item, Mapping):
            content = item.get("text", item.get("content"))
            docs.append(document(item.get("id"), item.get("score"), content, item.get("metadata"), where, id_key))
        elif isinstance(item, list) and len(item) == 2:
            docs.append(document(item[0], item[1], None, None, where, id_key))
        else:
            docs.append(document(item, None, None, None, where, id_key))
    return docs


def _feedback(value: Any) -> list[Feedback]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for i, item in enumerate(items):
        fld = f"feedback.{i}"
        if not isinstance(item, Mapping) or not isinstance(item.get("kind"), str) or "value" not in item:
            raise Malformed(fld, 'expected {"kind": str, "value": ..., "doc_id"?, "at"?}')
        doc = item.get("doc_id")
        if doc is not None and not isinstance(doc, str):
            raise Malformed(f"{fld}.doc_id", f"expected a string, got {type(doc).__name__}")
        out.append(Feedback(item["kind"], item["value"], doc, timestamp(item.get("at"), f"{fld}.at")))
    return out


def read_line(obj: Any, file: str, line: int, id_key: str) -> Retrieval:
    """One log record as a Retrieval; Malformed names the field."""
    if not isinstance(obj, Mapping):
        raise Malformed("line", f"expected a JSON object, got {type(obj).__name__}")
    rec_id = obj.get("id")
    span_id = str(rec_id) if isinstance(rec_id, (str, int)) and not isinstance(rec_id, bool) else f"line {line}"
    session, user = obj.get("session"), obj.get("user")
    return Retrieval(
        text_field(obj.get("query"), "query"),
        _retrieved(obj.get("retrieved"), id_key),
        file,
        span_id,
        str(obj.get("system") or JSONL),
        trace_id=None if obj.get("trace_id") is None else str(obj["trace_id"]),
        at=timestamp(obj.get("timestamp"), "timestamp"),
        session=None if session is None else str(session),
        user=None if user is None else str(user),
        feedback=_feedback(obj.get("feedback")),
    )


def read_plain(path: str, id_key: str, out: ReadOut) -> None:
    """Every line of a plain log into `out`."""
    for line, text in iter_lines(path):
        if not text.strip():
            continue
        obj: Any = None
        try:
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise Malformed("line", f"malformed JSON ({exc.msg} at column {exc.colno})") from None
            out.retrievals.append(read_line(obj, path, line, id_key))
        except Malformed as exc:
            rec_id = obj.get("id") if isinstance(obj, Mapping) else None
            out.problems.append(Problem(path, None if rec_id is None else str(rec_id), exc.field, exc.reason, line))
