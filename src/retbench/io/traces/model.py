"""What every trace reader yields: one `Retrieval` per retriever span, one `Problem` per malformed span.

A reader never drops a span without counting it: each span read is exactly one of a retrieval, a span
that is not a retriever span (counted by kind), or a malformed span (a `Problem` naming the file, the
span id and the field). A retriever span with one bad document is malformed as a whole: recording the
rest would move every later document up a rank, which is not what the live system served.

Document ids: `document.id` when the span carries one, else the `id_key` entry (default `id`) of the
document's metadata (LangChain's instrumentation records no document id, only the metadata retbench's
framework adapters put the id in). Scores follow `data.ids.served_scores`: kept when every document has
one and they never increase down the list, else the served order is scored n, n-1, ..., 1.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from retbench.data.ids import id_problem, score_problem


@dataclass
class Document:
    """One retrieved document as the span recorded it."""

    doc_id: str
    score: float | None = None
    content: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass
class Feedback:
    """A user's reaction recorded with a trace (thumbs, a click); its own label source, never mixed into qrels."""

    kind: str
    value: Any
    doc_id: str | None = None
    at: datetime | None = None


@dataclass
class Retrieval:
    """One retriever call: the query, the ranking served and where it came from."""

    query: str
    documents: list[Document]
    file: str
    span_id: str
    source: str  # the system the traces came from: `langchain`, `llama-index`, `phoenix`, `jsonl`, ...
    trace_id: str | None = None
    at: datetime | None = None
    session: str | None = None
    user: str | None = None
    error: str | None = None  # the span's own error status message (the query failed live)
    parent_id: str | None = None  # the enclosing span, to tell a retriever's inner spans from the call itself
    feedback: list[Feedback] = field(default_factory=list)


@dataclass
class Problem:
    """A malformed span or record: where it is and which field is wrong."""

    file: str
    span_id: str | None
    field: str
    reason: str
    line: int | None = None
    span: bool = True  # False for a record that is not a span (a Langfuse score): not counted among spans

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line is not None else "")
        span = f"span {self.span_id}" if self.span_id else "span (no id)"
        return f"{where}: {span}: field '{self.field}': {self.reason}"

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "span_id": self.span_id,
            "field": self.field,
            "reason": self.reason,
        }


NESTED = "RETRIEVER (inside a retriever span)"


@dataclass
class ReadOut:
    """Everything read from trace files: retrievals, malformed spans, and the other spans counted by kind."""

    retrievals: list[Retrieval] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    other_kinds: Counter[str] = field(default_factory=Counter)
    formats: dict[str, str] = field(default_factory=dict)  # file -> format read

    @property
    def spans(self) -> int:
        return len(self.retrievals) + sum(p.span for p in self.problems) + sum(self.other_kinds.values())

    def fold_nested(self) -> None:
        """A retriever span inside another retriever span of the same trace (LlamaIndex records `retrieve` and
        the `_retrieve` it calls) is part of that call, not a second one: counted as `NESTED`, not imported."""
        outer = {(r.trace_id, r.span_id) for r in self.retrievals}
        nested = [r for r in self.retrievals if r.parent_id is not None and (r.trace_id, r.parent_id) in outer]
        if nested:
            inner = {id(r) for r in nested}
            self.retrievals = [r for r in self.retrievals if id(r) not in inner]
            self.other_kinds[NESTED] += len(nested)

    def extend(self, other: ReadOut) -> None:
        self.retrievals += other.retrievals
        self.problems += other.problems
        self.other_kinds.update(other.other_kinds)
        self.formats.update(other.formats)


class Malformed(Exception):
    """Raised inside a reader for one span; turned into a `Problem` by the reader's loop."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field, self.reason = field, reason


def epoch_nanos(value: object, fld: str) -> datetime | None:
    """OTLP's `*UnixNano` (an integer, or its decimal text in the JSON mapping) as a UTC datetime."""
    if value in (None, "", 0, "0"):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit():
        raise Malformed(fld, f"expected nanoseconds since 1970 as an integer, got {value!r:.40}")
    return datetime.fromtimestamp(int(value) / 1e9, tz=timezone.utc)


def timestamp(value: object, fld: str) -> datetime | None:
    """An ISO-8601 time (naive means UTC) or seconds since 1970 as a UTC datetime; None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
    if isinstance(value, str):
        try:
            at = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return at if at.tzinfo else at.replace(tzinfo=timezone.utc)
    raise Malformed(fld, f"expected an ISO-8601 time or seconds since 1970, got {value!r:.40}")


def text_field(value: object, fld: str) -> str:
    """A required non-empty string (the query)."""
    if not isinstance(value, str):
        raise Malformed(fld, "missing" if value is None else f"expected a string, got {type(value).__name__}")
    if not value.strip():
        raise Malformed(fld, "empty query text")
    return value


def metadata_of(value: object, fld: str) -> dict[str, Any] | None:
    """Document metadata: a mapping, or the JSON text of one (OpenInference records it as a JSON string)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise Malformed(fld, f"not JSON ({exc.msg})") from None
    if not isinstance(value, Mapping):
        raise Malformed(fld, f"expected an object, got {type(value).__name__}")
    return dict(value)


def document(doc_id: object, score: object, content: object, metadata: object, prefix: str, id_key: str) -> Document:
    """One document from its four recorded parts; `prefix` names its fields in errors (`retrieval.documents.3`)."""
    meta = metadata_of(metadata, f"{prefix}.document.metadata")
    if doc_id is None and meta is not None:
        doc_id = meta.get(id_key)
    if doc_id is None:
        raise Malformed(f"{prefix}.document.id", f"missing (and no {id_key!r} in the document's metadata)")
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    problem = id_problem(doc_id)
    if problem:
        raise Malformed(f"{prefix}.document.id", problem)
    if score is not None and (problem := score_problem(score)):
        raise Malformed(f"{prefix}.document.score", problem)
    if content is not None and not isinstance(content, str):
        raise Malformed(f"{prefix}.document.content", f"expected a string, got {type(content).__name__}")
    return Document(str(doc_id), None if score is None else float(score), content, meta)  # type: ignore[arg-type]
