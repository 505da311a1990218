"""A span's attributes read by the conventions that name them: OpenInference, or Langfuse's own.

OpenInference (the names come from `openinference-semantic-conventions`, imported, not retyped): a
retriever span has `openinference.span.kind` = `RETRIEVER`, the query in `input.value` and the ranking
flattened as `retrieval.documents.<i>.document.{id,score,content,metadata}` (i = 0, 1, ... in served
order); `session.id` and `user.id` when the application set them. Langfuse's SDK writes
`langfuse.observation.type` = `retriever` with the input and output as JSON text; its LangChain handler
records the retriever's documents as LangChain `Document` objects (`id`, `page_content`, `metadata`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from openinference.semconv.trace import DocumentAttributes, OpenInferenceSpanKindValues, SpanAttributes

from retbench.io.traces.model import Document, Malformed, Retrieval, document, text_field

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
RETRIEVER = OpenInferenceSpanKindValues.RETRIEVER.value
DOCS = SpanAttributes.RETRIEVAL_DOCUMENTS
DOC_ID, DOC_SCORE = DocumentAttributes.DOCUMENT_ID, DocumentAttributes.DOCUMENT_SCORE
DOC_CONTENT, DOC_METADATA = DocumentAttributes.DOCUMENT_CONTENT, DocumentAttributes.DOCUMENT_METADATA
LANGFUSE_TYPE = "langfuse.observation.type"
LANGFUSE_INPUT, LANGFUSE_OUTPUT = "langfuse.observation.input", "langfuse.observation.output"
_DOC_KEY = re.compile(rf"^{re.escape(DOCS)}\.(\d+)\.(.+)$")


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested attributes (Phoenix stores them so) as OpenInference's flat dotted keys; lists by index."""
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list) and prefix.endswith(DOCS):  # only the document list is indexed, not tag lists
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, v in items:
        out.update(flatten(v, f"{prefix}.{key}" if prefix else key))
    return out


def span_kind(attrs: Mapping[str, Any]) -> str:
    """The span's kind: OpenInference's, else Langfuse's observation type (upper-cased), else `UNKNOWN`."""
    kind = attrs.get(KIND) or attrs.get(LANGFUSE_TYPE) or "UNKNOWN"
    return str(kind).upper()


def is_retriever(attrs: Mapping[str, Any]) -> bool:
    return span_kind(attrs) == RETRIEVER


def openinference_documents(attrs: Mapping[str, Any], id_key: str) -> list[Document]:
    """The ranking of an OpenInference retriever span, in served order; a gap in the indexes is malformed."""
    parts: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        m = _DOC_KEY.match(key)
        if m:
            parts.setdefault(int(m.group(1)), {})[m.group(2)] = value
    if DOCS in attrs:  # an unflattened list (a hand-written or re-serialised span)
        listed = attrs[DOCS]
        if not isinstance(listed, list):
            raise Malformed(DOCS, f"expected a list of documents, got {type(listed).__name__}")
        for i, d in enumerate(listed):
            if not isinstance(d, Mapping):
                raise Malformed(f"{DOCS}.{i}", f"expected a document object, got {type(d).__name__}")
            parts.setdefault(i, {}).update(flatten(d))
    docs: list[Document] = []
    for i in range(len(parts)):
        if i not in parts:
            raise Malformed(f"{DOCS}.{i}", f"missing (documents 0..{max(parts)} recorded with gaps)")
        p = parts[i]
        docs.append(
            document(p.get(DOC_ID), p.get(DOC_SCORE), p.get(DOC_CONTENT), p.get(DOC_METADATA), f"{DOCS}.{i}", id_key)
        )
    return docs


def _json_text(value: Any, fld: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value  # a plain string input is the query itself


def langfuse_query(value: Any, fld: str) -> str:
    """The query of a Langfuse retriever observation: its input text, or the `query`/`input` of an input object."""
    value = _json_text(value, fld)
    if isinstance(value, Mapping):
        value = value.get("query", value.get("input"))
        fld = f"{fld}.query"
    return text_field(value, fld)


def langfuse_documents(value: Any, fld: str, id_key: str) -> list[Document]:
    """The documents of a Langfuse retriever observation's output (LangChain `Document` dumps, or
    `{"id", "score", "content"|"text"|"page_content", "metadata"}` objects), in served order."""
    value = _json_text(value, fld)
    if isinstance(value, Mapping) and isinstance(value.get("documents"), list):
        value, fld = value["documents"], f"{fld}.documents"
    if value is None:
        value = []
    if not isinstance(value, list):
        raise Malformed(fld, f"expected a list of documents, got {type(value).__name__}")
    docs = []
    for i, d in enumerate(value):
        if not isinstance(d, Mapping):
            raise Malformed(f"{fld}.{i}", f"expected a document object, got {type(d).__name__}")
        content = d.get("page_content", d.get("content", d.get("text")))
        docs.append(document(d.get("id"), d.get("score"), content, d.get("metadata"), f"{fld}.{i}", id_key))
    return docs


def retrieval_from_attributes(
    attrs: Mapping[str, Any],
    *,
    file: str,
    span_id: str,
    source: str,
    id_key: str,
    trace_id: str | None = None,
    at: datetime | None = None,
    error: str | None = None,
    parent_id: str | None = None,
) -> Retrieval:
    """A Retrieval from a retriever span's flat attributes (OpenInference's, else Langfuse's); Malformed names the field."""
    if KIND in attrs:
        query = text_field(attrs.get(SpanAttributes.INPUT_VALUE), SpanAttributes.INPUT_VALUE)
        docs = openinference_documents(attrs, id_key)
    else:
        query = langfuse_query(attrs.get(LANGFUSE_INPUT), LANGFUSE_INPUT)
        docs = langfuse_documents(attrs.get(LANGFUSE_OUTPUT), LANGFUSE_OUTPUT, id_key)
    session, user = attrs.get(SpanAttributes.SESSION_ID), attrs.get(SpanAttributes.USER_ID)  # Langfuse uses these too
    return Retrieval(
        query,
        docs,
        file,
        span_id,
        source,
        trace_id=trace_id,
        at=at,
        session=None if session is None else str(session),
        user=None if user is None else str(user),
        error=error,
        parent_id=parent_id,
    )
