"""`retbench serve`: a small HTTP retrieval server over any retbench retriever (standard library only).

It turns an in-process retriever into the kind of endpoint users run, so the `http` adapter can be
checked end to end against a known answer, and so a retriever built here can be called by other tools.

    POST /search  {"query": "...", "k": 10}     -> {"retrieved": [{"id": "...", "score": 12.3, "text"?: "..."}]}
    GET  /search?query=...&k=10                 -> the same
    GET  /health                                -> {"status": "ok", "adapter": "...", "documents": N}

Scores are written as JSON floats (Python's repr, which round-trips exactly), in the retriever's order,
so a client reads back the very numbers the retriever produced. Searches are serialized with a lock
(retrievers are not promised to be thread-safe); connections are HTTP/1.1 keep-alive, one thread each.
Bad requests get 400, a failing retriever 500 with its message, both as `{"error": "..."}`: a body
that is not a JSON object, nested too deeply to parse, `k` that is not an integer in 1..max_k (`1e999`,
`2.5`, `true`), a `query` that is not a string.

Under load: the listen backlog (`backlog`, default 1024; the kernel caps it at net.core.somaxconn) holds
the connections that arrive while every thread is busy, so 64 or more concurrent clients are queued,
not reset. A connection that sends nothing for `timeout` seconds (default 30) is closed, so idle or
stalled clients cannot hold threads forever.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from retbench.data import Corpus
from retbench.io.datasets import load_dataset
from retbench.retrievers.base import Retriever, create

MAX_BODY = 1 << 20
DEFAULT_BACKLOG = 1024
DEFAULT_TIMEOUT_S = 30.0


def _parse_k(value: Any) -> int | None:
    """An integer k from JSON (int) or a query string (digits); None for anything else (floats, bools, 1e999)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 18:
        return int(value)
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        self.timeout = self.server.owner.timeout  # socket read timeout: idle or stalled clients are let go
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.owner.verbose:
            super().log_message(format, *args)

    def _send(self, code: int, obj: Any) -> None:
        try:
            data = json.dumps(obj, allow_nan=False).encode("utf-8")
        except ValueError as exc:  # a NaN or infinite score is not JSON
            code, data = 500, json.dumps({"error": f"unserializable result: {exc}"}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _search(self, params: dict[str, Any]) -> None:
        owner = self.server.owner
        query, k = params.get("query"), params.get("k", owner.default_k)
        if not isinstance(query, str):
            return self._send(400, {"error": "field 'query' must be a string"})
        k = _parse_k(k)
        if k is None:
            return self._send(400, {"error": f"field 'k' must be an integer in 1..{owner.max_k}"})
        if not 1 <= k <= owner.max_k:
            return self._send(400, {"error": f"field 'k' must be in 1..{owner.max_k}"})
        try:
            ranking = owner.search(query, k)
        except Exception as exc:
            return self._send(500, {"error": f"{type(exc).__name__}: {exc}"})
        self._send(200, {"retrieved": owner.render(ranking)})

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/health":
            owner = self.server.owner
            return self._send(
                200,
                {
                    "status": "ok",
                    "adapter": owner.retriever.adapter,
                    "name": owner.retriever.name,
                    "documents": owner.documents,
                },
            )
        if url.path == "/search":
            return self._search(dict(urllib.parse.parse_qsl(url.query)))
        self._send(404, {"error": f"no route {url.path}; use /search or /health"})

    def do_POST(self) -> None:
        if urllib.parse.urlsplit(self.path).path != "/search":
            return self._send(404, {"error": "POST to /search"})
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self.close_connection = True
            return self._send(400, {"error": f"send a JSON body of 1..{MAX_BODY} bytes with Content-Length"})
        try:
            params = json.loads(self.rfile.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return self._send(400, {"error": f"body is not JSON: {exc}"})
        except RecursionError:
            return self._send(400, {"error": "body is nested too deeply"})
        if not isinstance(params, dict):
            return self._send(400, {"error": "body must be a JSON object"})
        self._search(params)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: RetrievalServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up or timed out is routine under load: one line when verbose, no traceback."""
        import sys

        if self.owner.verbose:
            exc = sys.exc_info()[1]
            print(f"retbench serve: connection from {client_address[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)


class RetrievalServer:
    """Serve `retriever` (already indexed) at http://host:port/search; `port=0` picks a free port."""

    def __init__(
        self,
        retriever: Retriever,
        *,
        corpus: Corpus | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        include_text: bool = False,
        default_k: int = 10,
        max_k: int = 1000,
        verbose: bool = False,
        backlog: int = DEFAULT_BACKLOG,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if include_text and corpus is None:
            raise ValueError("include_text needs the corpus")
        if backlog < 1 or not timeout > 0:
            raise ValueError("backlog must be at least 1 and timeout positive")
        self.timeout = float(timeout)
        self.retriever, self.corpus = retriever, corpus
        self.include_text, self.default_k, self.max_k, self.verbose = include_text, default_k, max_k, verbose
        self.documents = len(corpus) if corpus is not None else None
        self._lock = threading.Lock()
        self._httpd = _Server((host, port), _Handler, bind_and_activate=False)
        self._httpd.owner = self
        self._httpd.request_queue_size = int(backlog)  # listen() backlog: the stdlib default of 5 resets bursts
        try:
            self._httpd.server_bind()
            self._httpd.server_activate()
        except BaseException:
            self._httpd.server_close()
            raise
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}/search"

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        with self._lock:
            return self.retriever.search_one(query, k)

    def render(self, ranking: list[tuple[str, float]]) -> list[dict[str, Any]]:
        out = []
        for doc, score in ranking:
            item: dict[str, Any] = {"id": str(doc), "score": float(score)}
            if self.include_text and self.corpus is not None and doc in self.corpus:
                item["text"] = self.corpus.joined(self.corpus.index[doc])
            out.append(item)
        return out

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.2)

    def start(self) -> RetrievalServer:
        """Serve from a background thread (tests, notebooks)."""
        self._thread = threading.Thread(target=self.serve_forever, name="retbench-serve", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> RetrievalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_dataset(
    dataset: str,
    adapter: str,
    params: dict[str, Any] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    include_text: bool = False,
    verbose: bool = False,
    backlog: int = DEFAULT_BACKLOG,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> RetrievalServer:
    """Build `adapter` over a dataset's corpus and return the (not yet started) server."""

    ds = load_dataset(dataset)
    retriever = create(adapter, params or {}, name=adapter)
    retriever.index(ds.corpus)
    return RetrievalServer(
        retriever,
        corpus=ds.corpus,
        host=host,
        port=port,
        include_text=include_text,
        verbose=verbose,
        backlog=backlog,
        timeout=timeout,
    )
