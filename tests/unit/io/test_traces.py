"""Trace import on files the tests write: every span is imported, counted as another kind, or reported as
malformed with its file, span id and field; duplicates merge by the stated rule; sampling and windows are
reproducible; the folder holds queries, the live run, span texts and feedback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retbench.errors import InputError
from retbench.io.traces import import_traces, query_key, read_file
from retbench.io.traces.flow import qid_of
from retbench.io.trec import read_run

TRACE = "0123456789abcdef0123456789abcdef"
T0 = 1_777_000_000_000_000_000  # 2026-04-24T03:06:40Z in nanoseconds


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def span(n: int, query: Any = "what is bm25", docs: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    """An OpenInference retriever span in OTLP/JSON; `docs` as {"id", "score", "content", "metadata"}."""
    attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
    if query is not None:
        attrs["input.value"] = query
    for i, d in enumerate(docs if docs is not None else [{"id": "d1", "score": 2.0}, {"id": "d2", "score": 1.0}]):
        for k, v in d.items():
            attrs[f"retrieval.documents.{i}.document.{k}"] = v
    attrs.update(extra.pop("attrs", {}))
    out = {
        "traceId": TRACE,
        "spanId": f"{n:016x}",
        "name": "retrieve",
        "startTimeUnixNano": str(T0 + n * 60_000_000_000),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()],
    }
    out.update(extra)
    return out


def otlp(spans: list[dict[str, Any]], scope: str = "openinference.instrumentation.langchain") -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": scope}, "spans": spans}]}]}


def write(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj))
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"spanId": ""}, "spanId"),
        ({"traceId": "xyz"}, "traceId"),
        ({"query": None}, "input.value"),
        ({"query": "   "}, "input.value"),
        ({"query": 42}, "input.value"),
        ({"docs": [{"score": 1.0}]}, "retrieval.documents.0.document.id"),
        ({"docs": [{"id": "d1"}, {"id": "has space"}]}, "retrieval.documents.1.document.id"),
        ({"docs": [{"id": "d1", "score": "high"}]}, "retrieval.documents.0.document.score"),
        ({"docs": [{"id": "d1", "score": "NaN"}]}, "retrieval.documents.0.document.score"),
        ({"docs": [{"metadata": "{not json"}]}, "retrieval.documents.0.document.metadata"),
        ({"startTimeUnixNano": "yesterday"}, "startTimeUnixNano"),
        ({"attributes": "oops"}, "attributes"),
    ],
)
def test_each_malformed_otlp_span_is_named_by_file_span_and_field_and_counted(
    tmp_path: Path, bad: dict[str, Any], field: str
) -> None:
    kwargs = {k: bad.pop(k) for k in ("query", "docs") if k in bad}
    broken = span(2, **kwargs, **bad)
    path = write(tmp_path / "t.json", otlp([span(1), broken]))
    got = read_file(path)
    assert [p.field for p in got.problems] == [field]
    problem = got.problems[0]
    assert problem.file == str(path)
    assert problem.span_id == (None if field == "spanId" else f"{2:016x}")
    assert field in str(problem) and str(path) in str(problem)
    assert len(got.retrievals) == 1 and got.spans == 2


def test_a_gap_in_the_document_indexes_is_malformed(tmp_path: Path) -> None:
    gap = span(1, docs=[{"id": "d1"}])
    gap["attributes"].append({"key": "retrieval.documents.2.document.id", "value": {"stringValue": "d3"}})
    got = read_file(write(tmp_path / "t.json", otlp([gap])))
    assert got.problems[0].field == "retrieval.documents.1"


def test_spans_that_are_not_retriever_spans_are_counted_by_kind(tmp_path: Path) -> None:
    chain = {
        "traceId": TRACE,
        "spanId": "00000000000000aa",
        "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "CHAIN"}}],
    }
    bare = {"traceId": TRACE, "spanId": "00000000000000bb", "attributes": []}
    path = write(tmp_path / "t.json", otlp([span(1), chain, bare]))
    done = import_traces([path], tmp_path / "out")
    assert done.summary["other_spans"] == {"CHAIN": 1, "UNKNOWN": 1}
    assert done.summary["spans"] == 3 and done.summary["retriever_spans"] == 1


def test_a_retriever_span_inside_a_retriever_span_is_one_call(tmp_path: Path) -> None:
    inner = span(2, query='{"query_bundle": {}}', docs=[], parentSpanId=f"{1:016x}")
    got = import_traces([write(tmp_path / "t.json", otlp([span(1), inner]))], tmp_path / "out")
    assert got.summary["retriever_spans"] == 1
    assert got.summary["other_spans"] == {"RETRIEVER (inside a retriever span)": 1}


def test_duplicates_merge_exact_and_near_with_counts_and_the_earliest_ranking(tmp_path: Path) -> None:
    spans = [
        span(1, "What is BM25?", [{"id": "a", "score": 3.0}]),
        span(2, "what is  bm25", [{"id": "b", "score": 3.0}]),
        span(3, "What is BM25?", [{"id": "a", "score": 3.0}]),
        span(4, "dense retrieval", [{"id": "c", "score": 1.0}]),
    ]
    done = import_traces([write(tmp_path / "t.json", otlp(spans))], tmp_path / "out")
    assert done.summary["duplicates"] | {"near_rule": None} == {"exact": 1, "near": 1, "queries": 2, "near_rule": None}
    rows = {r["text"]: r for r in lines(tmp_path / "out" / "queries.jsonl")}
    bm25 = rows["What is BM25?"]
    assert bm25["_id"] == qid_of(query_key("WHAT IS BM25")) == qid_of(query_key("what, is bm25!"))
    assert bm25["metadata"]["count"] == 3 and bm25["metadata"]["variants"] == {"what is  bm25": 1}
    assert bm25["metadata"]["rankings"] == 2 and bm25["metadata"]["trace_ids"] == [TRACE]
    run = read_run(tmp_path / "out" / "runs" / "live-langchain.trec")
    assert run.ranking(bm25["_id"]) == [("a", 3.0)]


def _log(n: int) -> list[dict[str, Any]]:
    return [{"query": f"question {i}", "retrieved": [f"d{i}"], "timestamp": 1_700_000_000 + i} for i in range(n)]


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_seeded_sampling_is_reproducible_and_stable_as_the_log_grows(tmp_path: Path) -> None:
    small, large = _write_jsonl(tmp_path / "s.jsonl", _log(40)), _write_jsonl(tmp_path / "l.jsonl", _log(80))

    def kept(path: Path, seed: int, tag: str) -> set[str]:
        import_traces([path], tmp_path / tag, max_queries=10, seed=seed)
        return {r["text"] for r in lines(tmp_path / tag / "queries.jsonl")}

    first, again = kept(small, 7, "a"), kept(small, 7, "b")
    assert first == again and len(first) == 10
    assert any(kept(small, seed, f"c{seed}") != first for seed in (1, 2, 3))
    grown = kept(large, 7, "d")
    assert len(grown) == 10 and grown & set(f"question {i}" for i in range(40)) <= first
    summary = json.loads((tmp_path / "a" / "import.json").read_text())["sampled"]
    assert summary["kept"] == 10 and summary["dropped"] == 30 and summary["seed"] == 7


def test_time_window_is_since_inclusive_until_exclusive_and_untimed_spans_are_counted(tmp_path: Path) -> None:
    from datetime import datetime, timezone

    rows = [*_log(5), {"query": "no time", "retrieved": ["x"]}]
    path = _write_jsonl(tmp_path / "log.jsonl", rows)
    at = lambda i: datetime.fromtimestamp(1_700_000_000 + i, tz=timezone.utc)  # noqa: E731
    done = import_traces([path], tmp_path / "out", since=at(1), until=at(3))
    assert {r["text"] for r in lines(tmp_path / "out" / "queries.jsonl")} == {"question 1", "question 2"}
    assert done.summary["window"] | {"since": None, "until": None} == {
        "since": None,
        "until": None,
        "outside": 3,
        "no_timestamp": 1,
    }


def test_plain_jsonl_writes_queries_run_corpus_and_feedback(tmp_path: Path) -> None:
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [{"_id": "d2", "title": "", "text": "known"}])
    rows = [
        {
            "query": "q one",
            "retrieved": [{"id": "d1", "score": 2.5, "text": "first text"}, ["d2", 1.5]],
            "timestamp": "2026-05-01T12:00:00",
            "session": "s1",
            "user": "u1",
            "id": "req-1",
            "feedback": [{"kind": "thumbs", "value": 1}, {"kind": "click", "value": True, "doc_id": "d1"}],
        },
        {"query": "q two", "retrieved": ["d3", "d4", "d3"], "timestamp": "2026-05-01T12:05:00Z"},
        "{broken",
        {"query": "q three", "retrieved": "d5"},
        {"query": "q four", "retrieved": [], "feedback": {"kind": "thumbs"}},
    ]
    done = import_traces([_write_jsonl(tmp_path / "log.jsonl", rows)], tmp_path / "out", corpus=corpus)
    out = tmp_path / "out"
    assert [(p.line, p.field) for p in done.problems] == [(3, "line"), (4, "retrieved"), (5, "feedback.0")]
    assert done.summary["spans"] == 5 and done.summary["malformed"]["count"] == 3
    run = read_run(out / "runs" / "live-jsonl.trec")
    q1, q2 = qid_of(query_key("q one")), qid_of(query_key("q two"))
    assert run.ranking(q1) == [("d1", 2.5), ("d2", 1.5)]
    assert run.ranking(q2) == [("d3", 2.0), ("d4", 1.0)]  # no scores: served order, a repeat keeps its best rank
    assert done.summary["run"]["repeated_documents_dropped"] == 1
    assert lines(out / "corpus.jsonl") == [
        {"_id": "d1", "title": "", "text": "first text", "metadata": {"source": "traces"}}
    ]
    assert done.summary["documents"]["already_in_corpus"] == 1
    fb = lines(out / "feedback.jsonl")
    assert [(f["qid"], f["doc_id"], f["kind"], f["value"], f["at"]) for f in fb] == [
        (q1, None, "thumbs", 1, "2026-05-01T12:00:00Z"),
        (q1, "d1", "click", True, "2026-05-01T12:00:00Z"),
    ]
    meta = lines(out / "queries.jsonl")[0]["metadata"]
    assert meta["sessions"] == ["s1"] and meta["users"] == ["u1"] and meta["span_ids"] == ["req-1"]


def test_a_query_that_failed_live_is_recorded_as_failed_not_as_an_empty_answer(tmp_path: Path) -> None:
    failed = span(1, docs=[], status={"code": 2, "message": "store timed out"})
    done = import_traces([write(tmp_path / "t.json", otlp([failed]))], tmp_path / "out")
    assert (
        done.summary["run"]["failed_live"] == 1
        and lines(tmp_path / "out" / "queries.jsonl")[0]["metadata"]["failed"] == 1
    )


def test_phoenix_span_export_reads_flat_or_nested_attributes(tmp_path: Path) -> None:
    flat = {
        "id": "U3Bhbjox",
        "name": "retrieve",
        "context": {"trace_id": TRACE, "span_id": "a1"},
        "span_kind": "RETRIEVER",
        "parent_id": None,
        "start_time": "2026-05-01T12:00:00+00:00",
        "end_time": "2026-05-01T12:00:01+00:00",
        "status_code": "OK",
        "status_message": "",
        "attributes": {
            "input.value": "flat query",
            "retrieval.documents.0.document.id": "d1",
            "retrieval.documents.0.document.score": 0.5,
        },
        "events": [],
    }
    nested = {
        **flat,
        "context": {"trace_id": TRACE, "span_id": "a2"},
        "span_kind": "UNKNOWN",
        "attributes": {
            "openinference": {"span": {"kind": "RETRIEVER"}},
            "input": {"value": "nested query"},
            "retrieval": {"documents": [{"document": {"id": "d9", "score": 0.7}}]},
        },
    }
    llm = {**flat, "context": {"trace_id": TRACE, "span_id": "a3"}, "span_kind": "LLM"}
    bad = {
        **flat,
        "context": {"trace_id": TRACE, "span_id": "a4"},
        "attributes": {"input.value": "x", "retrieval.documents.0.document.score": 1},
    }
    got = read_file(write(tmp_path / "p.json", {"data": [flat, nested, llm, bad], "next_cursor": None}))
    assert [(r.query, [d.doc_id for d in r.documents]) for r in got.retrievals] == [
        ("flat query", ["d1"]),
        ("nested query", ["d9"]),
    ]
    assert got.other_kinds == {"LLM": 1}
    assert [(p.span_id, p.field) for p in got.problems] == [("a4", "retrieval.documents.0.document.id")]


def test_langfuse_observation_export_reads_retriever_observations(tmp_path: Path) -> None:
    obs = {
        "id": "o1",
        "traceId": "t1",
        "type": "RETRIEVER",
        "startTime": "2026-05-01T12:00:00Z",
        "projectId": "p",
        "input": {"query": "langfuse query"},
        "sessionId": "s",
        "userId": "u",
        "output": [{"id": None, "page_content": "text a", "metadata": {"id": "a"}, "type": "Document"}],
    }
    gen = {**obs, "id": "o2", "type": "GENERATION"}
    bad = {**obs, "id": "o3", "output": "not documents"}
    got = read_file(write(tmp_path / "lf.json", {"data": [obs, gen, bad], "meta": {}}))
    assert [(r.query, r.documents[0].doc_id, r.documents[0].content, r.session) for r in got.retrievals] == [
        ("langfuse query", "a", "text a", "s")
    ]
    assert got.other_kinds == {"GENERATION": 1}
    assert [(p.span_id, p.field) for p in got.problems] == [("o3", "output")]


def test_a_file_that_is_no_trace_export_or_another_format_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a trace export"):
        read_file(write(tmp_path / "x.json", {"hello": 1}))
    with pytest.raises(InputError, match="--format jsonl, but the file reads as otlp"):
        read_file(write(tmp_path / "t.json", otlp([span(1)])), "jsonl")


def test_scores_are_kept_when_every_document_has_one_and_they_never_rise_else_the_served_order_counts(
    tmp_path: Path,
) -> None:
    spans = [
        span(1, "kept", [{"id": "a", "score": 3.0}, {"id": "b", "score": 3.0}, {"id": "c", "score": 0.5}]),
        span(2, "rising", [{"id": "a", "score": 1.0}, {"id": "b", "score": 2.0}]),
        span(3, "partial", [{"id": "a", "score": 1.0}, {"id": "b"}]),
    ]
    done = import_traces([write(tmp_path / "t.json", otlp(spans))], tmp_path / "out")
    run = read_run(tmp_path / "out" / "runs" / "live-langchain.trec")
    # kept as given; a tie is ordered as trec_eval orders it (doc id descending), as for every run
    assert run.ranking(qid_of("kept")) == [("b", 3.0), ("a", 3.0), ("c", 0.5)]
    assert run.ranking(qid_of("rising")) == [("a", 2.0), ("b", 1.0)]  # the served order, not the scores' order
    assert run.ranking(qid_of("partial")) == [("a", 2.0), ("b", 1.0)]
    assert done.summary["run"]["scored_by_served_order"] == 2


def test_snake_case_otlp_as_phoenix_otlpv1_answers_reads_like_otlp_json(tmp_path: Path) -> None:
    snake = {
        "trace_id": TRACE,
        "span_id": "00000000000000a1",
        "start_time_unix_nano": T0,
        "attributes": [
            {"key": "openinference.span.kind", "value": {"string_value": "RETRIEVER"}},
            {"key": "input.value", "value": {"string_value": "snake query"}},
            {"key": "retrieval.documents.0.document.id", "value": {"string_value": "d1"}},
            {"key": "retrieval.documents.0.document.score", "value": {"double_value": 0.25}},
        ],
    }
    path = write(
        tmp_path / "s.json", {"resource_spans": [{"scope_spans": [{"scope": {"name": "x"}, "spans": [snake]}]}]}
    )
    got = read_file(path)
    assert [(r.query, r.documents[0].doc_id, r.documents[0].score, r.span_id) for r in got.retrievals] == [
        ("snake query", "d1", 0.25, "00000000000000a1")
    ]


def test_langfuse_trace_scores_become_feedback_on_its_retriever_calls(tmp_path: Path) -> None:
    obs = {
        "id": "o1",
        "traceId": "t1",
        "type": "RETRIEVER",
        "startTime": "2026-05-01T12:00:00Z",
        "input": "scored query",
        "output": [{"id": "a", "page_content": "text a"}],
    }
    trace = {
        "id": "t1",
        "timestamp": "2026-05-01T12:00:00Z",
        "observations": [obs, {**obs, "id": "o2", "type": "SPAN"}],
        "scores": [
            {"name": "user-thumbs", "value": 1, "timestamp": "2026-05-01T12:03:00Z"},
            {"name": "clicked", "value": None, "stringValue": "yes", "observationId": "o1"},
            {"name": "elsewhere", "value": 0, "observationId": "o9"},
            "junk",
        ],
    }
    done = import_traces([write(tmp_path / "trace.json", trace)], tmp_path / "out")
    fb = lines(tmp_path / "out" / "feedback.jsonl")
    assert [(f["kind"], f["value"], f["at"]) for f in fb] == [
        ("user-thumbs", 1, "2026-05-01T12:03:00Z"),
        ("clicked", "yes", "2026-05-01T12:00:00Z"),
    ]
    assert [(p.field, p.span_id) for p in done.problems] == [("scores.3", None)]
    assert done.summary["spans"] == 2 and done.summary["retriever_spans"] == 1  # a score is not a span


def test_the_folder_loads_as_a_beir_dataset_without_qrels(tmp_path: Path) -> None:
    from retbench.io.datasets import load_dataset

    rows = [{"query": "q one", "retrieved": [{"id": "d1", "text": "first"}]}]
    import_traces([_write_jsonl(tmp_path / "log.jsonl", rows)], tmp_path / "out")
    ds = load_dataset(tmp_path / "out")
    assert list(ds.queries.values()) == ["q one"] and ds.corpus["d1"].text == "first" and not ds.qrels
