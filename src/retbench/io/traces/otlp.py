"""OpenTelemetry OTLP trace exports: the JSON mapping (one `ExportTraceServiceRequest` per file, or one per
line as the OpenTelemetry Collector's file exporter writes them) and the protobuf bytes the OTLP/HTTP
exporters send (`.pb`, `.binpb`; read with `opentelemetry-proto`, the `traces` extra).

JSON keys are read in lowerCamelCase (the OTLP/JSON spelling) or snake_case (the proto field names, as
Phoenix's `/spans/otlpv1` answers). Trace and span ids are hex in OTLP/JSON; the generic protobuf JSON
mapping writes them in base64, which is converted. The system name comes from the instrumentation scope
(`openinference.instrumentation.langchain` -> `langchain`), else the resource's `service.name`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from retbench.errors import InputError
from retbench.io.traces.model import Malformed, Problem, ReadOut, epoch_nanos
from retbench.io.traces.semconv import is_retriever, retrieval_from_attributes, span_kind

_HEX = re.compile(r"^[0-9a-fA-F]+$")
_CAMEL = re.compile(r"([A-Z])")
_STATUS_ERROR = (2, "STATUS_CODE_ERROR", "ERROR")


def get(obj: Mapping[str, Any], camel: str) -> Any:
    """A field by its OTLP/JSON name or its snake_case proto name."""
    if camel in obj:
        return obj[camel]
    return obj.get(_CAMEL.sub(r"_\1", camel).lower())


def hex_id(value: Any, size: int, fld: str) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lower-case hex, from hex or the base64 of the bytes."""
    if not isinstance(value, str) or not value:
        raise Malformed(fld, "missing" if value in (None, "") else f"expected a string, got {type(value).__name__}")
    if len(value) == 2 * size and _HEX.match(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise Malformed(fld, f"expected {2 * size} hex digits, got {value!r:.40}")
    return raw.hex()


def _optional_id(value: Any) -> str | None:
    """A parent span id when there is one (empty for a root span)."""
    try:
        return hex_id(value, 8, "parentSpanId") if value else None
    except Malformed:
        return None


def any_value(value: Any, fld: str) -> Any:
    """An OTLP `AnyValue` as a Python value."""
    if not isinstance(value, Mapping):
        raise Malformed(fld, f"expected an AnyValue object, got {type(value).__name__}")
    for camel in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        v = get(value, camel)
        if v is not None:
            return v
    v = get(value, "intValue")
    if v is not None:
        try:
            return int(v)  # int64 is decimal text in OTLP/JSON
        except (TypeError, ValueError):
            raise Malformed(fld, f"intValue is not an integer: {v!r:.40}") from None
    arr = get(value, "arrayValue")
    if arr is not None:
        return [any_value(x, fld) for x in (get(arr, "values") or [])]
    kv = get(value, "kvlistValue")
    if kv is not None:
        return attributes(get(kv, "values") or [], fld)
    return None


def attributes(items: Any, fld: str = "attributes") -> dict[str, Any]:
    """An OTLP `KeyValue` list as a dict."""
    if not isinstance(items, list):
        raise Malformed(fld, f"expected a list of key/value objects, got {type(items).__name__}")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise Malformed(fld, f"expected {{'key', 'value'}}, got {item!r:.60}")
        out[item["key"]] = any_value(item.get("value") or {}, f"{fld}.{item['key']}")
    return out


def system_of(scope: str, service: str | None) -> str:
    """A short system name for the trace source: the instrumented framework, else the service."""
    if scope.startswith("openinference.instrumentation."):
        return scope.removeprefix("openinference.instrumentation.").replace("_", "-")
    if scope.startswith("langfuse"):
        return "langfuse"
    return service or scope or "otlp"


def _spans(request: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any] | Any]]:
    """(system, span) for every span of one ExportTraceServiceRequest (JSON mapping)."""
    resource_spans = get(request, "resourceSpans")
    if not isinstance(resource_spans, list):
        raise ValueError("no resourceSpans list")
    for rs in resource_spans:
        resource = get(rs, "resource") or {}
        try:
            service = attributes(get(resource, "attributes") or []).get("service.name")
        except Malformed:
            service = None
        scopes = get(rs, "scopeSpans") or get(rs, "instrumentationLibrarySpans") or []
        for ss in scopes:
            scope = get(ss, "scope") or get(ss, "instrumentationLibrary") or {}
            system = system_of(str(scope.get("name") or ""), None if service is None else str(service))
            for span in get(ss, "spans") or []:
                yield system, span


def read_request(request: Mapping[str, Any], file: str, id_key: str, out: ReadOut, line: int | None = None) -> None:
    """Every span of one request into `out`: a retrieval, another kind, or a Problem."""
    try:
        spans = list(_spans(request))
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError(f"not an OTLP trace export ({exc})", path=file, line=line) from None
    for system, span in spans:
        span_id = None
        try:
            if not isinstance(span, Mapping):
                raise Malformed("spans", f"expected a span object, got {type(span).__name__}")
            span_id = hex_id(get(span, "spanId"), 8, "spanId")
            attrs = attributes(get(span, "attributes") or [])
            if not is_retriever(attrs):
                out.other_kinds[span_kind(attrs)] += 1
                continue
            trace_id = hex_id(get(span, "traceId"), 16, "traceId")
            status = get(span, "status") or {}
            error = (status.get("message") or "error") if status.get("code") in _STATUS_ERROR else None
            at = epoch_nanos(get(span, "startTimeUnixNano"), "startTimeUnixNano")
            out.retrievals.append(
                retrieval_from_attributes(
                    attrs,
                    file=file,
                    span_id=span_id,
                    source=system,
                    id_key=id_key,
                    trace_id=trace_id,
                    at=at,
                    error=error,
                    parent_id=_optional_id(get(span, "parentSpanId")),
                )
            )
        except Malformed as exc:
            out.problems.append(Problem(file, span_id, exc.field, exc.reason, line))


def read_protobuf(path: Path, id_key: str, out: ReadOut) -> None:
    """An OTLP protobuf `ExportTraceServiceRequest` (what the OTLP/HTTP exporters POST)."""
    try:
        from google.protobuf.json_format import MessageToDict
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:
        raise InputError(
            "reading OTLP protobuf needs opentelemetry-proto: pip install 'retbench[traces]'", path=path
        ) from None
    try:
        message = ExportTraceServiceRequest.FromString(path.read_bytes())
    except DecodeError as exc:
        raise InputError(f"not an OTLP protobuf trace export ({exc})", path=path) from None
    read_request(MessageToDict(message), str(path), id_key, out)
