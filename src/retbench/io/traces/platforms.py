"""Span exports of the two tracing platforms, as their REST APIs return them.

- Phoenix (`GET /v1/projects/{project}/spans`): `{"data": [span, ...], "next_cursor"}`, each span
  `{"id", "name", "context": {"trace_id", "span_id"}, "span_kind", "parent_id", "start_time", "end_time",
  "status_code", "status_message", "attributes", "events"}` with the OpenInference attributes flattened to
  dotted keys (`retrieval.documents.0.document.id`) and the span kind moved out to `span_kind`. Nested
  attributes (Phoenix's stored form) are flattened the same way. A list of spans, or one span a line, reads too.
- Langfuse (`GET /api/public/v2/observations`, the SDK's `ObservationsV2Response`): `{"data": [observation,
  ...], "meta"}`, each observation `{"id", "traceId", "type", "startTime", "input", "output", "metadata",
  "userId", "sessionId", ...}`; a retriever is `type` `RETRIEVER`. A list of observations, one a line, or a
  trace with its `observations` (`GET /api/public/traces/{id}`) read too. A trace's `scores` (user feedback
  sent with `langfuse.create_score`) become feedback: a score naming an observation belongs to that
  retriever call, a score on the whole trace to each retriever call of the trace (kind = the score's name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retbench.io.traces.model import Feedback, Malformed, Problem, ReadOut, Retrieval, timestamp
from retbench.io.traces.semconv import (
    KIND,
    RETRIEVER,
    flatten,
    langfuse_documents,
    langfuse_query,
    retrieval_from_attributes,
)

PHOENIX, LANGFUSE = "phoenix", "langfuse"


def records(obj: Any) -> list[Any] | None:
    """The span/observation records of a platform export: its `data` list, `observations`, or the list itself."""
    if isinstance(obj, list):
        return obj
    if isinstance(obj, Mapping):
        for key in ("data", "observations"):
            if isinstance(obj.get(key), list):
                return obj[key]
    return None


def looks_like(record: Any) -> str | None:
    """Which platform wrote this record (None: neither)."""
    if not isinstance(record, Mapping):
        return None
    if isinstance(record.get("context"), Mapping) and ("span_kind" in record or "attributes" in record):
        return PHOENIX
    if "type" in record and ("traceId" in record or "startTime" in record):
        return LANGFUSE
    return None


def _phoenix(span: Mapping[str, Any], file: str, id_key: str, out: ReadOut) -> Retrieval | None:
    context = span.get("context")
    if not isinstance(context, Mapping):
        raise Malformed("context", "missing span context")
    span_id = context.get("span_id")
    if not isinstance(span_id, str) or not span_id:
        raise Malformed("context.span_id", "missing")
    attrs = flatten(span.get("attributes") or {})
    given = [str(k).upper() for k in (span.get("span_kind"), attrs.get(KIND)) if k]
    kind = next((k for k in given if k != "UNKNOWN"), "UNKNOWN")  # Phoenix says UNKNOWN when it found no kind
    if kind != RETRIEVER:
        out.other_kinds[kind] += 1
        return None
    attrs[KIND] = kind
    error = (span.get("status_message") or "error") if str(span.get("status_code")).upper() == "ERROR" else None
    return retrieval_from_attributes(
        attrs,
        file=file,
        span_id=span_id,
        source=PHOENIX,
        id_key=id_key,
        trace_id=context.get("trace_id"),
        at=timestamp(span.get("start_time"), "start_time"),
        error=error,
        parent_id=span.get("parent_id"),
    )


def _langfuse(obs: Mapping[str, Any], file: str, id_key: str, out: ReadOut) -> Retrieval | None:
    span_id = obs.get("id")
    if not isinstance(span_id, str) or not span_id:
        raise Malformed("id", "missing observation id")
    kind = str(obs.get("type") or "UNKNOWN").upper()
    if kind != RETRIEVER:
        out.other_kinds[kind] += 1
        return None
    error = (obs.get("statusMessage") or "error") if obs.get("level") == "ERROR" else None
    session, user = obs.get("sessionId"), obs.get("userId")
    return Retrieval(
        langfuse_query(obs.get("input"), "input"),
        langfuse_documents(obs.get("output"), "output", id_key),
        file,
        span_id,
        LANGFUSE,
        trace_id=obs.get("traceId"),
        at=timestamp(obs.get("startTime"), "startTime"),
        session=None if session is None else str(session),
        user=None if user is None else str(user),
        error=error,
        parent_id=obs.get("parentObservationId"),
    )


def read_record(record: Any, platform: str, file: str, id_key: str, out: ReadOut, line: int | None = None) -> None:
    """One span (Phoenix) or observation (Langfuse) into `out`: a retrieval, another kind, or a Problem."""
    span_id = None
    try:
        if not isinstance(record, Mapping):
            raise Malformed("data", f"expected a span object, got {type(record).__name__}")
        span_id = (record.get("context") or {}).get("span_id") if platform == PHOENIX else record.get("id")
        got = (_phoenix if platform == PHOENIX else _langfuse)(record, file, id_key, out)
        if got is not None:
            out.retrievals.append(got)
    except Malformed as exc:
        out.problems.append(Problem(file, span_id if isinstance(span_id, str) else None, exc.field, exc.reason, line))


def attach_scores(trace: Any, retrievals: list[Retrieval], file: str, out: ReadOut) -> None:
    """A Langfuse trace's scores as feedback on its retriever calls; a score that is not an object is a Problem."""
    scores = trace.get("scores") if isinstance(trace, Mapping) else None
    if not isinstance(scores, list):
        return
    for i, score in enumerate(scores):
        try:
            if not isinstance(score, Mapping) or not isinstance(score.get("name"), str):
                raise Malformed(f"scores.{i}", 'expected {"name": str, "value": ..., "observationId"?, "timestamp"?}')
            value = score.get("value") if score.get("value") is not None else score.get("stringValue")
            at = timestamp(score.get("timestamp"), f"scores.{i}.timestamp")
        except Malformed as exc:
            out.problems.append(Problem(file, None, exc.field, exc.reason, span=False))
            continue
        target = score.get("observationId")
        for r in retrievals:
            if target in (None, r.span_id):
                r.feedback.append(Feedback(score["name"], value, None, at))
