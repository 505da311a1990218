"""`retbench serve`: a small HTTP retrieval server over any retbench retriever (standard library only).

It turns an in-process retriever into the kind of endpoint users run, so the `http` adapter can be
checked end to end against a known answer, and so a retriever built here can be called by other tools.

    POST /search  {"query": "...", "k": 10}     -> {"retrieved": [{"id": "...", "score": 12.3, "text"?: "..."}]}
    GET  /search?query=...&k=10                 -> the same
    GET  /health                                -> {"status": "ok", "adapter": "...", "documents": N}
    POST /rerank  {"query": "...", "documents": ["...", ...], "top_n": 3}
                  -> {"results": [{"index": 0, "relevance_score": 0.91}, ...]}   (best first)

`/rerank` is the shape Cohere, Jina and text-embeddings-inference share; it is served when the
server holds a reranker (`retbench serve --rerank cross_encoder --rerank-params '{"model": ...}'`),
so the `http` reranker can be checked end to end against a local cross-encoder.

Scores are written as JSON floats (Python's repr, which round-trips exactly), in the retriever's order,
so a client reads back the very numbers the retriever produced. Searches are serialized with a lock
(retrievers are not promised to be thread-safe); connections are HTTP/1.1 keep-alive, one thread each.
Bad requests get 400, a failing retriever 500 with its message, both as `{"error": "..."}`: a body
that is not a JSON object, nested too deeply to parse, `k` that is not an integer in 1..max_k (`1e999`,
`2.5`, `true`, `"3"`) or a `top_n` that is not one from 1 (`int_field`: one rule, a JSON integer and never
its text; a query string's digits are read, since a query string is all text), a `query` that is not a string.

Under load: the listen backlog (`backlog`, default 1024; the kernel caps it at net.core.somaxconn) holds
the connections that arrive while every thread is busy, so 64 or more concurrent clients are queued,
not reset. `timeout` (default 30 s) is a deadline for receiving a whole request, request line to last
body byte, counted from when the connection starts waiting for it: a client that is silent, or that
drip-feeds one byte at a time, gets `408` with the bound and is disconnected, so no client holds a
thread longer than that. (Searching and reranking are not under the deadline: they are the server's
own work.) `/rerank` takes at most `max_documents` documents per request (default 1000, the limit
Cohere's rerank API documents); more is a 400 saying the bound. Integers in a body are limited to 30
digits (Python refuses to read more than 4,300 and the stdlib server would drop the connection without
a word); every other failure inside a request is answered and logged in one line, never swallowed.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from retbench.data import Corpus
from retbench.io.datasets import load_dataset
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import Retriever, create

if TYPE_CHECKING:
    from retbench.retrievers.rerank import Reranker

MAX_BODY = 1 << 20
DEFAULT_BACKLOG = 1024
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_DOCUMENTS = 1000
MAX_INT_DIGITS = 30


def _bounded_int(text: str) -> int:
    """json's integer parser with a length bound: a 5,000-digit number is refused with a reason."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS} are read)")
    return int(text)


def int_field(value: object, name: str, low: int, high: int | None = None, *, text: bool = False) -> int | str:
    """`value` as an integer in low..high, or the 400 message naming the field.

    The one rule of every integer field (`/search` k, `/rerank` top_n): a JSON body's integer is a JSON
    integer, never its text ("3"), a boolean or a float; a query string is all text, so there (`text=True`)
    its digits are read.
    """
    bounds = f"{low}..{high}" if high is not None else f">= {low}"
    if text and isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 18:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "text" if isinstance(value, str) else type(value).__name__
        return f"field {name!r} must be an integer {bounds}, got {kind} {json.dumps(value)[:40]}"
    if value < low or (high is not None and value > high):
        return f"field {name!r} must be {bounds}, got {value}"
    return value


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        # the socket's own read timeout is only a backstop: the whole-request deadline (a timer, below) ends a
        # silent or slow request first, so the client hears why
        self.timeout = 2 * self.server.owner.timeout + 5  # type: ignore[misc]
        self._state = threading.Lock()
        self._waiting = False
        super().setup()

    def handle_one_request(self) -> None:
        """Read one request under the whole-request deadline (see the module docstring), then answer it."""
        with self._state:
            self._waiting = True
            self.raw_requestline = b""
        timer = threading.Timer(self.server.owner.timeout, self._expire)
        timer.daemon = True
        timer.start()
        try:
            super().handle_one_request()
        finally:
            timer.cancel()
            self._received()

    def _received(self) -> None:
        """The request is in: from here on the deadline no longer applies."""
        with self._state:
            self._waiting = False

    def _expire(self) -> None:
        """The deadline passed while the request was still arriving: hang up, with a 408 that says the
        bound once the request line is in (before it, the connection may just be an idle keep-alive one,
        whose client would read an unasked-for answer as the reply to its next request)."""
        with self._state:
            if not self._waiting:
                return
            self._waiting = False
            owner = self.server.owner
            if self.raw_requestline:
                body = json.dumps(
                    {"error": f"request not received within {owner.timeout:g} s (the server's whole-request deadline)"}
                ).encode()
                head = (
                    "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode()
                with contextlib.suppress(OSError):
                    self.connection.sendall(head + body)
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            if owner.verbose:
                where = self.client_address[0]
                print(f"retbench serve: {where}: request deadline of {owner.timeout:g} s passed", file=sys.stderr)

    def log_message(self, format: str, *args: object) -> None:
        if self.server.owner.verbose:
            super().log_message(format, *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self._received()  # the stdlib answers a malformed request itself: that answer ends the deadline too
        super().send_error(code, message, explain)

    def _send(self, code: int, obj: object) -> None:
        self._received()  # whatever is answered, the deadline no longer applies
        try:
            data = json.dumps(obj, allow_nan=False).encode("utf-8")
        except ValueError as exc:  # a NaN or infinite score is not JSON
            code, data = 500, json.dumps({"error": f"unserializable result: {exc}"}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _search(self, params: Mapping[str, object], *, query_string: bool = False) -> None:
        owner = self.server.owner
        query = params.get("query")
        if not isinstance(query, str):
            return self._send(400, {"error": "field 'query' must be a string"})
        k = int_field(params.get("k", owner.default_k), "k", 1, owner.max_k, text=query_string)
        if isinstance(k, str):
            return self._send(400, {"error": k})
        try:
            ranking = owner.search(query, k)
        except Exception as exc:
            return self._send(500, {"error": f"{type(exc).__name__}: {exc}"})
        self._send(200, {"retrieved": owner.render(ranking)})

    def do_GET(self) -> None:
        self._received()
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/health":
            return self._send(200, self.server.owner.health())
        if url.path == "/search" and self.server.owner.retriever is not None:
            return self._search(dict(urllib.parse.parse_qsl(url.query)), query_string=True)
        self._send(404, {"error": f"no route {url.path}; use /search or /health"})

    def _rerank(self, params: Mapping[str, object]) -> None:
        owner = self.server.owner
        query, docs, given_top_n = params.get("query"), params.get("documents"), params.get("top_n")
        if not isinstance(query, str):
            return self._send(400, {"error": "field 'query' must be a string"})
        if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
            return self._send(400, {"error": "field 'documents' must be a list of strings"})
        if len(docs) > owner.max_documents:
            return self._send(
                400,
                {
                    "error": f"field 'documents' holds {len(docs)} documents; this server reranks at most "
                    f"{owner.max_documents} per request (retbench serve --max-documents)"
                },
            )
        top_n = None if given_top_n is None else int_field(given_top_n, "top_n", 1)
        if isinstance(top_n, str):
            return self._send(400, {"error": top_n})
        try:
            results = owner.rerank(query, docs, top_n)
        except Exception as exc:
            return self._send(500, {"error": f"{type(exc).__name__}: {exc}"})
        self._send(200, {"results": results})

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        routes: dict[str, Callable[[Mapping[str, object]], None]] = {"/search": self._search, "/rerank": self._rerank}
        if path not in routes:
            return self._send(404, {"error": "POST to /search or /rerank"})
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self.close_connection = True
            return self._send(400, {"error": f"send a JSON body of 1..{MAX_BODY} bytes with Content-Length"})
        body = self.rfile.read(length)
        if len(body) < length:  # the client hung up, or the deadline cut it off: nobody to answer
            self.close_connection = True
            return
        self._received()
        try:
            params = json.loads(body, parse_int=_bounded_int)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return self._send(400, {"error": f"body is not JSON: {exc}"})
        except RecursionError:
            return self._send(400, {"error": "body is nested too deeply"})
        except ValueError as exc:  # an integer too long to read (see _bounded_int)
            return self._send(400, {"error": f"body refused: {exc}"})
        if not isinstance(params, dict):
            return self._send(400, {"error": "body must be a JSON object"})
        owner = self.server.owner
        if (owner.retriever if path == "/search" else owner.reranker) is None:
            return self._send(404, {"error": f"this server has no {'retriever' if path == '/search' else 'reranker'}"})
        routes[path](params)


class _Server(ThreadingHTTPServer):
    """Threads per connection; closing the server also closes the keep-alive connections still open, so
    a stopped server answers nobody (HTTP/1.1 clients keep their connection between requests)."""

    daemon_threads = True
    owner: RetrievalServer

    def server_activate(self) -> None:
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().server_activate()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        with self._open_lock:
            still = list(self._open)
            self._open.clear()
        for conn in still:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up or timed out is routine under load: one line when verbose, no traceback.
        Anything else is a defect a person should see: always one line on stderr."""
        exc = sys.exc_info()[1]
        if self.owner.verbose or not isinstance(exc, OSError):
            print(f"retbench serve: connection from {client_address[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)


class RetrievalServer:
    """Serve `retriever` (already indexed) at /search and/or `reranker` at /rerank; `port=0` picks a free port."""

    def __init__(
        self,
        retriever: Retriever | None = None,
        *,
        reranker: Reranker | None = None,
        corpus: Corpus | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        include_text: bool = False,
        default_k: int = 10,
        max_k: int = 1000,
        verbose: bool = False,
        backlog: int = DEFAULT_BACKLOG,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_documents: int = DEFAULT_MAX_DOCUMENTS,
    ) -> None:
        if include_text and corpus is None:
            raise ValueError("include_text needs the corpus")
        if backlog < 1 or not timeout > 0:
            raise ValueError("backlog must be at least 1 and timeout positive")
        if max_documents < 1:
            raise ValueError("max_documents must be at least 1")
        self.timeout = float(timeout)
        self.max_documents = int(max_documents)
        if retriever is None and reranker is None:
            raise ValueError("serve a retriever, a reranker or both")
        self.retriever, self.reranker, self.corpus = retriever, reranker, corpus
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

    @property
    def rerank_url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}/rerank"

    def health(self) -> JSONObject:
        out: JSONObject = {"status": "ok"}
        if self.retriever is not None:
            out.update(adapter=self.retriever.adapter, name=self.retriever.name, documents=self.documents)
        if self.reranker is not None:
            out["reranker"] = self.reranker.describe()
        return out

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        assert self.retriever is not None
        with self._lock:
            return self.retriever.search_one(query, k)

    def rerank(self, query: str, documents: list[str], top_n: int | None) -> list[dict[str, int | float]]:
        """[{index, relevance_score}] best first (ties by index), at most `top_n` of them."""
        assert self.reranker is not None
        with self._lock:
            scores = self.reranker.score(query, documents) if documents else []
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[: top_n or len(scores)]
        return [{"index": i, "relevance_score": float(scores[i])} for i in order]

    def render(self, ranking: list[tuple[str, float]]) -> list[dict[str, str | float]]:
        out = []
        for doc, score in ranking:
            item: dict[str, str | float] = {"id": str(doc), "score": float(score)}
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
    params: Mapping[str, object] | None = None,
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
