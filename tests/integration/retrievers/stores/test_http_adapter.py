"""The `http` adapter against real local servers on loopback.

- `retbench serve` in its own process, serving a BM25 index over the whole SciFact corpus: the adapter
  must reproduce the in-process BM25 run doc for doc and score for score, and the same nDCG through
  the experiment runner.
- A small in-test server that answers with real BM25 rankings but misbehaves on some routes (5xx,
  slow, not JSON, another response shape, auth) to check statuses, retries and secrecy.
Every server is started and stopped by the test; request loops are bounded by retries and timeouts.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from retbench.data import QueryStatus
from retbench.errors import BackendError, ConfigError
from retbench.retrievers.base import create
from stored import flat
from stress_support import serving

BM25 = {"k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en", "stemmer": "english"}


@pytest.fixture(scope="module")
def bm25_server() -> Iterator[str]:
    with serving(["scifact", "--adapter", "bm25s", "--params", json.dumps(BM25)]) as url:
        yield url


@pytest.fixture(scope="module")
def bm25_inprocess(scifact):
    r = create("bm25s", BM25, name="bm25")
    r.index(scifact.corpus)
    return r


def test_http_reproduces_inprocess_bm25_exactly(scifact, bm25_server, bm25_inprocess):
    queries = scifact.queries.subset(list(scifact.split("test"))[:120])
    local = bm25_inprocess.search(queries, 100)
    http = create("http", {"url": bm25_server, "concurrency": 4}, name="bm25-http")
    try:
        http.index(scifact.corpus)
        remote = http.search(queries, 100)
    finally:
        http.close()
    assert remote.query_ids == local.query_ids
    assert sum(len(remote.ranking(q)) for q in remote.query_ids) > 100 * 100  # real, deep rankings
    for q in local.query_ids:
        assert remote.ranking(q) == local.ranking(q), q  # ids, order and float scores all equal
        assert remote.status[q] == QueryStatus.OK and q not in remote.errors
        assert http.attempts[q] == {"attempts": 1, "errors": []}
        assert remote.latency[q] > 0


def test_http_get_with_text_and_url_template(scifact, bm25_server, bm25_inprocess):
    """GET with the query in the URL template and `include_text` off: the adapter still reads ids and scores."""
    url = bm25_server + "?query={query}"
    http = create("http", {"url": url, "method": "GET", "body": {"k": "{k}"}}, name="get")
    queries = scifact.queries.subset(list(scifact.split("test"))[:5])
    try:
        run = http.search(queries, 10)
    finally:
        http.close()
    for q in queries:
        assert run.ranking(q) == bm25_inprocess.search_one(queries[q], 10)


def test_runner_gives_identical_numbers_for_http_and_inprocess(tmp_path, bm25_server):
    cfg = {
        "name": "http-vs-bm25",
        "output": str(tmp_path / "out"),
        "depth": 100,
        "metrics": ["ndcg@10", "recall@100", "map"],
        "datasets": [{"name": "scifact", "split": "test", "max_queries": 60}],
        "systems": [
            {"name": "bm25", "adapter": "bm25s", "params": BM25},
            {"name": "bm25-http", "adapter": "http", "params": {"url": bm25_server, "concurrency": 2, "timeout": 30}},
        ],
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    from retbench.studies.benchmark import load_config, run_experiment

    outcome = run_experiment(load_config(path), log=lambda m: None)
    assert not outcome.backend_failed
    metrics = flat(tmp_path / "out")
    for m in cfg["metrics"]:
        assert metrics["bm25-http"][m] == metrics["bm25"][m]
    assert 0.6 < metrics["bm25"]["ndcg@10"] < 0.8
    runs = [(tmp_path / "out" / "systems" / s / "run.trec").read_text().splitlines() for s in ("bm25", "bm25-http")]
    assert [ln.rsplit(" ", 1)[0] for ln in runs[0]] == [ln.rsplit(" ", 1)[0] for ln in runs[1]]
    status = [
        json.loads(ln) for ln in (tmp_path / "out" / "systems" / "bm25-http" / "status.jsonl").read_text().splitlines()
    ]
    assert len(status) == 60 and all(s["status"] == "ok" and s["latency"] > 0 for s in status)


# -- a misbehaving service ---------------------------------------------------------------------
class _Faulty(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, *args) -> None:
        pass

    def _reply(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        args = dict(urllib.parse.parse_qsl(url.query))
        self._answer(url.path, {"query": args.get("q", ""), "k": int(args.get("n", 10))})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._answer(urllib.parse.urlsplit(self.path).path, body)

    def _answer(self, route: str, body: dict) -> None:
        srv = self.server
        query, k = body["query"], int(body["k"])
        with srv.lock:  # type: ignore[attr-defined]
            srv.calls[(route, query)] = n = srv.calls.get((route, query), 0) + 1  # type: ignore[attr-defined]
            ranking = srv.retriever.search_one(query, k)  # type: ignore[attr-defined]
        if route.startswith("/flaky") and n <= 2:  # each /flaky* route counts its own attempts
            return self._reply(503, b'{"error": "overloaded, try again"}')
        if route == "/slow":
            time.sleep(1.0)
        if route == "/garbage":
            return self._reply(200, b"<html>oops</html>", "text/html")
        if route == "/missing":
            return self._reply(404, b'{"error": "no such index"}')
        if route == "/auth" and self.headers.get("Authorization") != "Bearer s3cret-t0ken":
            return self._reply(401, json.dumps({"error": f"bad token {self.headers.get('Authorization')}"}).encode())
        if route == "/ids":
            return self._reply(200, json.dumps([d for d, _ in ranking]).encode())
        if route == "/nested":
            hits = [{"doc": d, "relevance": s, "body": f"text of {d}"} for d, s in ranking]
            return self._reply(200, json.dumps({"data": {"hits": hits}}).encode())
        if route == "/rag":  # a RAG endpoint: ranked list plus the answer side
            rag = {"answer": f"about {query[:20]}", "references": [ranking[0][0]], "abstained": False}
            rag["latency"] = {"retrieval": 0.002, "generation": 0.25}
            return self._reply(200, json.dumps({"retrieved": [{"id": d} for d, _ in ranking], **rag}).encode())
        if route == "/rag-nested":
            reply = {"text": "", "cites": [{"id": d} for d, _ in ranking[:2]], "refused": True}
            return self._reply(200, json.dumps({"data": {"hits": [d for d, _ in ranking]}, "reply": reply}).encode())
        if route == "/rag-bad":
            return self._reply(200, json.dumps({"retrieved": [d for d, _ in ranking], "abstained": "no"}).encode())
        self._reply(200, json.dumps({"retrieved": [{"id": d, "score": s} for d, s in ranking]}).encode())


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # the client hung up on /slow by design


@pytest.fixture(scope="module")
def faulty(scifact) -> Iterator[tuple[str, object]]:
    corpus = scifact.corpus.subset(scifact.corpus.ids[:600])
    bm25 = create("bm25s", BM25)
    bm25.index(corpus)
    srv = _QuietServer(("127.0.0.1", 0), _Faulty)
    srv.retriever, srv.calls, srv.lock = bm25, {}, threading.Lock()  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", bm25
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def few(scifact):
    return scifact.queries.subset(list(scifact.split("test"))[:6])


def _run(url: str, queries, k: int = 10, **params):
    http = create("http", {"url": url, **params}, name="svc")
    try:
        return http, http.search(queries, k)
    finally:
        http.close()


def test_retried_into_success_is_recorded(faulty, few):
    base, bm25 = faulty
    http, run = _run(base + "/flaky", few, retries=2, backoff=0.01)
    for q in few:
        assert run.status[q] == QueryStatus.OK
        assert run.ranking(q) == bm25.search_one(few[q], 10)
        assert http.attempts[q]["attempts"] == 3
        assert http.attempts[q]["errors"] == ['HTTP 503: {"error": "overloaded, try again"}'] * 2
        assert run.errors[q].startswith("ok after 3 attempts; earlier: HTTP 503")


def test_runner_marks_retried_answers_in_status_jsonl(faulty, tmp_path):
    """Through `retbench run`: a retried-into-success query is ok, scored, and its retries are in status.jsonl."""
    from retbench.studies.benchmark import load_config, run_experiment
    from stores_support import SCIFACT, SLICE

    base, _ = faulty
    cfg = {
        "name": "flaky",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": SCIFACT, **SLICE}],
        "systems": [
            {"name": "svc", "adapter": "http", "params": {"url": base + "/flaky-runner", "retries": 2, "backoff": 0.01}}
        ],
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    outcome = run_experiment(load_config(tmp_path / "cfg.yaml"), log=lambda m: None)
    assert not outcome.backend_failed
    records = [
        json.loads(ln) for ln in (tmp_path / "out" / "systems" / "svc" / "status.jsonl").read_text().splitlines()
    ]
    assert len(records) == SLICE["max_queries"]
    assert all(r["status"] == "ok" and r["error"].startswith("ok after 3 attempts; earlier: HTTP 503") for r in records)
    assert flat(tmp_path / "out")["svc"]["ndcg@10"] > 0


def test_retries_exhausted_is_an_error_with_the_last_message(faulty, scifact):
    base, _ = faulty
    queries = scifact.queries.subset(list(scifact.split("test"))[10:13])
    http, run = _run(base + "/flaky-exhausted", queries, retries=1, backoff=0.01)
    for q in queries:
        assert run.status[q] == QueryStatus.ERROR
        assert http.attempts[q]["attempts"] == 2
        assert run.errors[q].startswith('HTTP 503: {"error": "overloaded, try again"} (after 2 attempts')
    assert run.failed() == list(queries)


def test_timeout_is_a_timeout_not_an_error(faulty, few):
    base, _ = faulty
    http, run = _run(base + "/slow", few.subset(list(few)[:2]), timeout=0.2, retries=1, backoff=0.01, concurrency=2)
    for q in run.query_ids:
        assert run.status[q] == QueryStatus.TIMEOUT
        assert http.attempts[q] == {"attempts": 2, "errors": ["timeout after 0.2 s"] * 2}
        assert run.latency[q] >= 0.4  # both timed-out attempts are in the latency (a lower bound, not a speed claim)


def test_malformed_and_4xx_answers_are_not_retried(faulty, few):
    base, _ = faulty
    http, run = _run(base + "/garbage", few, retries=3)
    assert all(run.status[q] == QueryStatus.INVALID and http.attempts[q]["attempts"] == 1 for q in few)
    assert run.errors[next(iter(few))].startswith("malformed response: not JSON")
    http, run = _run(base + "/missing", few, retries=3)
    assert all(run.status[q] == QueryStatus.ERROR and http.attempts[q]["attempts"] == 1 for q in few)
    assert run.errors[next(iter(few))] == 'HTTP 404: {"error": "no such index"}'
    http, run = _run(base + "/retrieved", few, response_path="results.hits")
    assert (
        run.errors[next(iter(few))] == "malformed response: response_path 'results.hits': no 'results' in the response"
    )


def test_bare_ids_and_renamed_fields(faulty, few):
    base, bm25 = faulty
    _, run = _run(base + "/ids", few)
    for q in few:
        expect = [d for d, _ in bm25.search_one(few[q], 10)]
        assert run.docs(q) == expect
        assert [s for _, s in run.ranking(q)] == [float(10 - i) for i in range(len(expect))]  # n - rank
    http, run = _run(
        base + "/nested", few, response_path="data.hits", id_field="doc", score_field="relevance", text_field="body"
    )
    for q in few:
        assert run.ranking(q) == bm25.search_one(few[q], 10)
        assert all(http.texts[d] == f"text of {d}" for d in run.docs(q))


def test_get_body_becomes_the_query_string(faulty, few):
    base, bm25 = faulty
    _, run = _run(base + "/plain", few, 5, method="GET", body={"q": "{query}", "n": "{k}"})
    for q in few:
        assert run.ranking(q) == bm25.search_one(few[q], 5)


def test_auth_token_from_env_is_sent_and_never_written(faulty, few, monkeypatch):
    base, _ = faulty
    monkeypatch.setenv("RB_TEST_TOKEN", "s3cret-t0ken")
    http, run = _run(base + "/auth", few, auth_env="RB_TEST_TOKEN")
    assert all(run.status[q] == QueryStatus.OK for q in few)
    assert "s3cret" not in json.dumps(http.describe()) and "RB_TEST_TOKEN" in json.dumps(http.describe())
    monkeypatch.setenv("RB_TEST_TOKEN", "wrong-s3cret")
    http, run = _run(base + "/auth", few, auth_env="RB_TEST_TOKEN")
    assert all(run.status[q] == QueryStatus.ERROR for q in few)
    msg = run.errors[next(iter(few))]
    assert (
        msg.startswith("HTTP 401") and "wrong-s3cret" not in msg and "Bearer ***" in msg
    )  # the server echoed it; redacted
    monkeypatch.delenv("RB_TEST_TOKEN")
    with pytest.raises(ConfigError, match="RB_TEST_TOKEN"):
        create("http", {"url": base + "/auth", "auth_env": "RB_TEST_TOKEN"})


def test_unreachable_endpoint(scifact, few):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = create("http", {"url": f"http://127.0.0.1:{port}/search", "retries": 1, "backoff": 0.01})
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}/search is unreachable"):
        http.index(scifact.corpus)
    run = http.search(few, 10)
    http.close()
    assert all(run.status[q] == QueryStatus.ERROR and "ConnectionRefusedError" in run.errors[q] for q in few)
    assert all(http.attempts[q]["attempts"] == 2 for q in few)


def test_bad_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="url must be"):
        create("http", {"url": "localhost:8000"})
    with pytest.raises(ConfigError, match="unknown parameter 'tiemout'"):
        create("http", {"url": "http://127.0.0.1:1/x", "tiemout": 3})
    with pytest.raises(ConfigError, match="GET body must be a flat mapping"):
        create("http", {"url": "http://127.0.0.1:1/x", "method": "GET", "body": {"q": {"nested": 1}}})


def test_a_rag_endpoint_answer_side_is_read_beside_the_ranking(faulty, few):
    base, bm25 = faulty
    http, run = _run(base + "/rag", few)
    for q in few:
        top = bm25.search_one(few[q], 10)
        assert run.docs(q) == [d for d, _ in top]
        a = http.answers[q]
        assert a.text == f"about {few[q][:20]}" and a.references == (top[0][0],) and a.abstained is False
        assert a.latency == {"retrieval": 0.002, "generation": 0.25}


def test_answer_paths_map_a_custom_response_shape(faulty, few):
    base, bm25 = faulty
    paths = {"answer_path": "reply.text", "references_path": "reply.cites", "abstained_path": "reply.refused"}
    http, run = _run(base + "/rag-nested", few, response_path="data.hits", **paths)
    for q in few:
        top = [d for d, _ in bm25.search_one(few[q], 10)]
        assert run.docs(q) == top
        assert http.answers[q].references == tuple(top[:2]) and http.answers[q].abstained is True
    assert http.describe()["answer_paths"]["answer"] == "reply.text"


def test_a_malformed_answer_field_makes_the_query_invalid(faulty, few):
    base, _ = faulty
    http, run = _run(base + "/rag-bad", few)
    for q in few:
        assert run.status[q] == QueryStatus.INVALID
        assert "abstained must be true or false" in run.errors[q]
    assert http.answers == {}
