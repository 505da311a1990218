"""Traces as Phoenix's and Langfuse's own SDKs write them, from the shipped LangChain BM25 retriever.

- Phoenix: `phoenix.otel.register` with its OTLP/HTTP exporter posting to a loopback server that keeps
  each request body (the protobuf bytes Phoenix's collector would receive); the files import as written.
- Langfuse: the SDK's LangChain `CallbackHandler` on a client whose span exporter is the OpenTelemetry
  SDK's in-memory one (no server); its spans (`langfuse.observation.*` attributes) import from OTLP/JSON.
  Langfuse's REST export (`GET /api/public/v2/observations`) needs a Langfuse server, which cannot run
  here, so that file is built with the SDK's own response model (`ObservationsV2Response`) and
  serializer (`EventSerializer` for the documents, `.json()` for the page) from the same retriever output.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_community", reason="the frameworks extra is not installed")
pytest.importorskip("phoenix.otel", reason="the traces extra is not installed")
pytest.importorskip("langfuse", reason="the traces extra is not installed")

from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from http_support import serving_in_thread
from retbench.data import Corpus, Queries
from retbench.data.ids import served_scores
from retbench.io.datasets import load_dataset
from retbench.io.traces import import_traces, query_key
from retbench.io.traces.flow import qid_of
from retbench.io.trec import read_run
from retbench.retrievers.frameworks.langchain import LangChainRetriever
from retbench.retrievers.frameworks.langchain_examples import bm25

K = 5


@pytest.fixture(scope="module")
def slice_() -> tuple[Corpus, Queries]:
    ds = load_dataset("scifact")
    return ds.corpus.subset(ds.corpus.ids[:200]), ds.queries.subset(list(ds.split("test"))[:6])


@pytest.fixture(scope="module")
def retriever(slice_: tuple[Corpus, Queries]) -> Any:
    """The shipped LangChain BM25 factory over the adapter's own documents (ids in metadata and Document.id)."""
    corpus, _ = slice_
    adapter = LangChainRetriever(factory="retbench.retrievers.frameworks.langchain_examples:bm25")
    r = bm25(adapter.documents(corpus))
    r.k = K
    return r


def _expected(answers: dict[str, list[Any]]) -> dict[str, list[tuple[str, float]]]:
    """What the retriever returned, keyed by imported query id: ids, and scores by the served-order rule."""
    out = {}
    for text, docs in answers.items():
        ids = [d.metadata["id"] for d in docs]
        out[qid_of(query_key(text))] = list(zip(ids, served_scores([None] * len(ids)), strict=True))
    return out


class _Keep(BaseHTTPRequestHandler):
    bodies: list[bytes]

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[bytes]]]:
    bodies: list[bytes] = []
    handler = type("Keep", (_Keep,), {"bodies": bodies})
    with serving_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", bodies


def test_phoenix_otel_export_imports_to_the_rankings_the_retriever_returned(
    tmp_path: Path, slice_: tuple[Corpus, Queries], retriever: Any, collector: tuple[str, list[bytes]]
) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from phoenix.otel import register

    endpoint, bodies = collector
    provider = register(
        endpoint=endpoint,
        protocol="http/protobuf",
        batch=False,
        set_global_tracer_provider=False,
        verbose=False,
        project_name="retbench-test",
    )
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        answers = {slice_[1][q]: retriever.invoke(slice_[1][q]) for q in slice_[1]}
        provider.force_flush()
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    files = []
    for i, body in enumerate(bodies):
        files.append(tmp_path / f"request-{i}.pb")
        files[-1].write_bytes(body)
    done = import_traces(files, tmp_path / "out", fmt="phoenix")
    assert done.summary["malformed"]["count"] == 0 and done.system == "live-langchain"
    run = read_run(tmp_path / "out" / "runs" / "live-langchain.trec")
    expected = _expected(answers)
    assert {q: run.ranking(q) for q in run.query_ids} == expected


def test_langfuse_sdk_spans_and_observation_export_import_to_the_rankings_the_retriever_returned(
    tmp_path: Path, slice_: tuple[Corpus, Queries], retriever: Any
) -> None:
    from langfuse import Langfuse
    from langfuse._utils.serializer import EventSerializer
    from langfuse.api import ObservationsV2Meta, ObservationsV2Response, ObservationV2
    from langfuse.langchain import CallbackHandler

    exporter = InMemorySpanExporter()
    client = Langfuse(
        public_key="pk-lf-retbench",
        secret_key="sk-lf-retbench",
        base_url="http://127.0.0.1:9",
        span_exporter=exporter,
        flush_at=1,
    )
    try:
        handler = CallbackHandler(public_key="pk-lf-retbench")
        answers = {slice_[1][q]: retriever.invoke(slice_[1][q], config={"callbacks": [handler]}) for q in slice_[1]}
        client.flush()
    finally:
        client.shutdown()
    spans = exporter.get_finished_spans()
    expected = _expected(answers)

    (tmp_path / "otlp.json").write_text(MessageToJson(encode_spans(spans)))
    done = import_traces([tmp_path / "otlp.json"], tmp_path / "out", fmt="langfuse")
    assert done.summary["malformed"]["count"] == 0 and done.system == "live-langfuse"
    run = read_run(tmp_path / "out" / "runs" / "live-langfuse.trec")
    assert {q: run.ranking(q) for q in run.query_ids} == expected

    page = ObservationsV2Response(
        data=[
            ObservationV2(
                id=f"obs-{i}",
                trace_id=f"trace-{i}",
                start_time=datetime(2026, 5, 1, 12, i, tzinfo=timezone.utc),
                project_id="p",
                type="RETRIEVER",
                input=text,
                output=json.loads(json.dumps(docs, cls=EventSerializer)),
            )
            for i, (text, docs) in enumerate(answers.items())
        ],
        meta=ObservationsV2Meta(),
    )
    (tmp_path / "observations.json").write_text(page.json())
    done = import_traces([tmp_path / "observations.json"], tmp_path / "api")
    assert done.summary["formats"] == {str(tmp_path / "observations.json"): "langfuse"}
    run = read_run(tmp_path / "api" / "runs" / "live-langfuse.trec")
    assert {q: run.ranking(q) for q in run.query_ids} == expected
    texts = {json.loads(x)["_id"] for x in (tmp_path / "api" / "corpus.jsonl").read_text().splitlines()}
    assert texts == {d for r in expected.values() for d, _ in r}
