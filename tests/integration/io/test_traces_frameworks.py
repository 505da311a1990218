"""Real traces: the shipped LangChain and LlamaIndex retrievers, instrumented with OpenInference, run on a
SciFact slice; what the instrumentation wrote (OTLP JSON, one request per file; OTLP protobuf) imports
back to exactly the run retbench recorded from the same retrievers: ids, order and scores.

The spans are taken with the OpenTelemetry SDK's in-memory exporter and serialised as the OTLP exporter
does (`opentelemetry-exporter-otlp-proto-common`'s `encode_spans` -> `ExportTraceServiceRequest`), then
written as protobuf bytes or with protobuf's JSON mapping (`MessageToJson`, ids in base64) or OTLP/JSON
(ids in hex, as the OTLP/JSON specification asks).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_community", reason="the frameworks extra is not installed")
pytest.importorskip("llama_index.core", reason="the frameworks extra is not installed")
pytest.importorskip("openinference.instrumentation.langchain", reason="the traces extra is not installed")
pytest.importorskip("openinference.instrumentation.llama_index", reason="the traces extra is not installed")

from google.protobuf.json_format import MessageToDict, MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from retbench.data import Corpus, Queries, Run
from retbench.io.datasets import load_dataset
from retbench.io.traces import import_traces, query_key
from retbench.io.traces.flow import qid_of
from retbench.io.trec import read_run
from retbench.retrievers import create

K = 10


@pytest.fixture(scope="module")
def scifact_slice() -> tuple[Corpus, Queries]:
    """300 SciFact documents and the first 12 test queries (distinct texts, so no query merges)."""
    ds = load_dataset("scifact")
    corpus = ds.corpus.subset(ds.corpus.ids[:300])
    qids = list(ds.split("test"))[:12]
    return corpus, ds.queries.subset(qids)


def _instrumented(instrumentor_cls: Any) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = instrumentor_cls()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def langchain_spans() -> Iterator[InMemorySpanExporter]:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    yield from _instrumented(LangChainInstrumentor)


@pytest.fixture
def llamaindex_spans() -> Iterator[InMemorySpanExporter]:
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    yield from _instrumented(LlamaIndexInstrumentor)


def _live_run(adapter: str, factory: str, corpus: Corpus, queries: Queries) -> Run:
    retriever = create(adapter, {"factory": factory, "concurrency": 2})
    retriever.index(corpus)
    return retriever.search(queries, K)


def _by_text(run: Run, queries: Queries) -> dict[str, list[tuple[str, float]]]:
    """The run keyed by the imported query id of each query text."""
    return {qid_of(query_key(queries[q])): list(run.ranking(q)) for q in queries}


def _otlp_json_hex(request: Any) -> dict[str, Any]:
    """OTLP/JSON as the specification writes it: protobuf's JSON mapping with trace and span ids in hex."""
    import base64

    body = MessageToDict(request)
    for rs in body["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return body


def _check_import(out: Path, expected: dict[str, list[tuple[str, float]]], system: str, spans: int) -> None:
    summary = json.loads((out / "import.json").read_text())
    assert summary["system"] == system
    assert summary["malformed"]["count"] == 0
    assert summary["retriever_spans"] == len(expected)
    assert summary["spans"] == spans  # every span counted: retriever or another kind
    assert summary["spans"] == summary["retriever_spans"] + sum(summary["other_spans"].values())
    imported = read_run(out / "runs" / f"{system}.trec")
    assert set(imported.query_ids) == set(expected)
    for qid, ranking in expected.items():
        assert list(imported.ranking(qid)) == ranking, qid


def test_langchain_bm25_traces_import_to_the_run_the_retriever_served(
    tmp_path: Path, scifact_slice: tuple[Corpus, Queries], langchain_spans: InMemorySpanExporter
) -> None:
    corpus, queries = scifact_slice
    run = _live_run("langchain", "retbench.retrievers.frameworks.langchain_examples:bm25", corpus, queries)
    spans = langchain_spans.get_finished_spans()
    request = encode_spans(spans)
    (tmp_path / "spans.json").write_text(MessageToJson(request))
    (tmp_path / "spans.pb").write_bytes(request.SerializeToString())
    expected = _by_text(run, queries)
    assert all(len(r) == K for r in expected.values())
    # LangChain's BM25Retriever gives no scores: both sides score the served order n..1
    assert all([s for _, s in r] == [float(K - i) for i in range(K)] for r in expected.values())
    for name in ("spans.json", "spans.pb"):
        out = tmp_path / f"out-{name}"
        done = import_traces([tmp_path / name], out)
        _check_import(out, expected, "live-langchain", len(spans))
        assert done.summary["run"]["scored_by_served_order"] == len(expected)
    corpus_rows = [json.loads(line) for line in (tmp_path / "out-spans.pb" / "corpus.jsonl").read_text().splitlines()]
    served = {d for r in expected.values() for d, _ in r}
    assert {row["_id"] for row in corpus_rows} == served  # the texts seen in spans, each served document's
    texts = dict(zip(corpus.ids, corpus.joined_texts(), strict=True))
    assert all(row["text"] == texts[row["_id"]] for row in corpus_rows)


def test_llamaindex_bm25_traces_import_with_the_retriever_scores(
    tmp_path: Path, scifact_slice: tuple[Corpus, Queries], llamaindex_spans: InMemorySpanExporter
) -> None:
    corpus, queries = scifact_slice
    run = _live_run("llamaindex", "retbench.retrievers.frameworks.llamaindex_examples:bm25", corpus, queries)
    spans = llamaindex_spans.get_finished_spans()
    expected = _by_text(run, queries)
    assert all(len(r) == K and r[0][1] > r[-1][1] for r in expected.values())  # BM25's own scores kept
    path = tmp_path / "spans.jsonl"  # one OTLP/JSON request a line, as the Collector's file exporter writes
    path.write_text("".join(json.dumps(_otlp_json_hex(encode_spans([s]))) + "\n" for s in spans))
    out = tmp_path / "out"
    done = import_traces([path], out)
    _check_import(out, expected, "live-llama-index", len(spans))
    assert done.summary["run"]["scored_by_served_order"] == 0
