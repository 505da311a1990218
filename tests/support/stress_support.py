"""Shared pieces of the stress, fault and journal tests: a SciFact slice, an async adapter, a call log.

Not a test module (no `test_` prefix); the test files import it from the tests folder, and the
subprocess tests reach `logged_bm25` as the adapter `stress_support:logged_bm25` (PYTHONPATH=tests/support).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import repo_paths
from child_output import line_queue
from retbench.data import Corpus, Dataset
from retbench.retrievers.base import Ranking, Retriever, create
from retbench.testing import stop_process

# this folder: on PYTHONPATH, subprocesses find the adapters below by module name
SUPPORT = repo_paths.SUPPORT


def scifact_slice(scifact: Dataset, n_queries: int = 40, n_other_docs: int = 400) -> Dataset:
    """The first `n_queries` judged test queries over their judged documents plus some others (real texts)."""
    qrels = scifact.split("test")
    qids = [q for q in qrels if q in scifact.queries][:n_queries]
    judged = {d for q in qids for d in qrels[q] if d in scifact.corpus}
    others = [d for d in scifact.corpus.ids if d not in judged][:n_other_docs]
    keep = [d for d in scifact.corpus.ids if d in judged or d in set(others)]
    return Dataset(
        "scifact-slice", scifact.corpus.subset(keep), scifact.queries.subset(qids), {"test": qrels.subset(qids)}
    )


def stress_raw(
    dataset_path: str | Path, output: str | Path, *, system: Mapping[str, Any] | None = None, **stress: Any
) -> dict[str, Any]:
    """A stress config mapping over a BEIR folder; `stress` items go into the `stress:` block."""
    return {
        "name": "stress-test",
        "output": str(output),
        "depth": 10,
        "metrics": ["ndcg@10", "recall@10"],
        "datasets": [{"path": str(dataset_path), "split": "test"}],
        "systems": [dict(system or {"name": "bm25", "adapter": "bm25s"})],
        "stress": {"levels": [2], "warmup": 0, "timeout_s": 5.0, **stress},
    }


class AsyncBM25(Retriever):
    """A BM25 adapter speaking the async protocol (capability "async", `asearch_one`)."""

    adapter = "async_bm25"
    capabilities = frozenset({"async"})

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.inner = create("bm25s", {})

    def index(self, corpus: Corpus) -> None:
        self.inner.index(corpus)

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return self.inner.search_batch(texts, k)

    async def asearch_one(self, text: str, k: int) -> Ranking:
        await asyncio.sleep(0)
        return self.inner.search_one(text, k)


class LoggedBM25(Retriever):
    """BM25 that appends every query text it serves to a file: counts backend calls across processes."""

    adapter = "logged_bm25"

    def __init__(self, log: str, delay_ms: float = 0.0, name: str | None = None) -> None:
        super().__init__(name)
        self.inner = create("bm25s", {})
        self.delay_s = delay_ms / 1000.0
        self._fh = open(log, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self._lock = threading.Lock()

    def index(self, corpus: Corpus) -> None:
        self.inner.index(corpus)

    def search_one(self, text: str, k: int) -> Ranking:
        with self._lock:
            self._fh.write(text.replace("\n", " ") + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
        if self.delay_s:
            threading.Event().wait(self.delay_s)
        return self.inner.search_one(text, k)

    def close(self) -> None:
        self._fh.close()


def logged_bm25(log: str, delay_ms: float = 0.0, name: str | None = None) -> LoggedBM25:
    return LoggedBM25(log, delay_ms, name)


# -- `retbench serve` in its own process ------------------------------------------------------------


@contextlib.contextmanager
def serving(args: list[str]) -> Iterator[str]:
    """`retbench serve ARGS` for the duration of a with-block: yields the /search URL, then stops it."""
    proc, url = start_serve(args)
    try:
        yield url
    finally:
        stop_process(proc, timeout=10)


def start_serve(args: list[str]) -> tuple[subprocess.Popen, str]:
    """Start `retbench serve ARGS` on 127.0.0.1 with a free port; (process, URL of /search) once it listens."""
    env = {**os.environ, "PYTHONPATH": str(repo_paths.SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "retbench.cli", "serve", *args, "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines = line_queue(proc)
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if line.startswith("serving "):
            return proc, line.split(" at ")[-1].strip()
    proc.kill()
    proc.wait(timeout=10)
    raise AssertionError("retbench serve did not start:\n" + "".join(seen))


# -- a real server process for the killed-server test -------------------------------------------------
class HttpRetriever(Retriever):
    """A minimal HTTP client: POST {"query", "k"} to /search, read {"retrieved": [{"id", "score"}, ...]}.

    Stands in for the `http` adapter (`retrievers/stores/http.py`) where that is not available; it
    hides nothing: a refused or dropped connection raises the urllib error as it came.
    """

    adapter = "test_http"

    def __init__(self, url: str, timeout_s: float = 5.0, name: str | None = None) -> None:
        super().__init__(name)
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        import json
        import urllib.request

        req = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            return json.loads(resp.read())

    def index(self, corpus: Corpus) -> None:
        have = self._post("/health", {})["documents"]
        if have != len(corpus):
            raise RuntimeError(f"server holds {have} documents, expected {len(corpus)}")

    def search_one(self, text: str, k: int) -> Ranking:
        return [(h["id"], h["score"]) for h in self._post("/search", {"query": text, "k": k})["retrieved"]]


def http_retriever(url: str, timeout_s: float = 5.0, name: str | None = None) -> HttpRetriever:
    return HttpRetriever(url, timeout_s, name)


def http_system(url: str) -> dict[str, Any]:
    """The stores engineer's `http` adapter when it is installed (retries off: stress counts retries), else ours."""
    from retbench.errors import ConfigError
    from retbench.retrievers.base import resolve_factory

    try:
        resolve_factory("http")
    except ConfigError:
        return {"name": "remote", "adapter": "stress_support:http_retriever", "params": {"url": url, "timeout_s": 5}}
    return {"name": "remote", "adapter": "http", "params": {"url": url + "/search", "retries": 0, "timeout": 5}}


def serve(folder: str, delay_ms: float = 0.0) -> None:
    """Serve BM25 over a BEIR folder on 127.0.0.1 (a free port, printed as `PORT <n>`) until killed."""
    import json
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from retbench.io.beir import read_beir

    ds = read_beir(folder)
    bm25 = create("bm25s", {})
    bm25.index(ds.corpus)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/health":
                out: dict[str, Any] = {"documents": len(ds.corpus)}
            else:
                time.sleep(delay_ms / 1000.0)
                hits = bm25.search_one(body["query"], int(body["k"]))
                out = {"retrieved": [{"id": d, "score": sc} for d, sc in hits]}
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    import sys

    serve(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
