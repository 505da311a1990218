"""A deployed RAG service evaluated end to end through `retbench run`, killed mid-run and resumed.

The service is a real HTTP server on 127.0.0.1 started by the test: BM25 (bm25s) over the shipped `rag`
corpus, answering each question with its top passage, the passage it cites, abstention and per-stage
latency. To kill the run at a known point without racing the clock, the server holds every request
after the first `HOLD_AFTER` until the test releases it: the run cannot get further than that, the test
waits (bounded) until those answers are journaled and the next request is held, then SIGKILLs it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import yaml

from http_support import send_json, serving_in_thread
from retbench.io.datasets import load_dataset
from retbench.results import read_results
from retbench.results.journal import Journal
from retbench.retrievers.base import create
from stored import flat

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
HOLD_AFTER = 9
CLI = [sys.executable, "-m", "retbench.cli", "run"]


class _Rag(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _RagServer

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv = self.server
        with srv.lock:
            srv.asked.append(body["query"])
            held = len(srv.asked) > HOLD_AFTER
            ranking = srv.bm25.search_one(body["query"], int(body["k"]))
        if held and not srv.release.wait(120):
            return
        top = ranking[0][0] if ranking else None
        answer = srv.texts[top].split(".")[0] if top else ""
        reply = {
            "retrieved": [{"id": d, "score": s} for d, s in ranking],
            "answer": answer,
            "references": [top] if top else [],
            "abstained": not answer,
            "latency": {"retrieval": 0.004, "generation": 0.1 + len(body["query"]) / 1000},
        }
        send_json(self, reply)


class _RagServer(ThreadingHTTPServer):
    daemon_threads = True
    bm25: object
    texts: dict[str, str]
    asked: list[str]
    lock: threading.Lock
    release: threading.Event

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the killed run hung up on the held request by design


@pytest.fixture
def rag_service() -> Iterator[_RagServer]:
    ds = load_dataset("rag")
    srv = _RagServer(("127.0.0.1", 0), _Rag)
    srv.bm25 = create("bm25s", {"stopwords": "en", "stemmer": "english"})
    srv.bm25.index(ds.corpus)  # type: ignore[attr-defined]
    srv.texts = {d.id: d.text for d in ds.corpus}
    srv.asked, srv.lock, srv.release = [], threading.Lock(), threading.Event()
    with serving_in_thread(srv):
        try:
            yield srv
        finally:
            srv.release.set()  # a held handler ends before the server shuts down


def _config(tmp_path: Path, port: int) -> Path:
    cfg = {
        "name": "rag-http",
        "output": str(tmp_path / "out"),
        "batch_size": 1,
        "depth": 10,
        "metrics": ["recall@5", "attribution", "token_f1", "abstention_accuracy"],
        "datasets": [{"name": "rag", "split": "test"}],
        "systems": [
            {
                "name": "svc",
                "adapter": "http",
                "params": {"url": f"http://127.0.0.1:{port}/rag", "concurrency": 1, "retries": 0, "timeout": 60},
            }
        ],
    }
    path = tmp_path / "rag-http.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _journaled(journal: Path) -> int:
    """Complete query lines on disk now (header and a torn last line not counted)."""
    if not journal.exists():
        return 0
    return max(0, journal.read_bytes().count(b"\n") - 1)


def test_a_killed_and_resumed_rag_run_keeps_every_answer_exactly_once(tmp_path: Path, rag_service) -> None:
    cfg = _config(tmp_path, rag_service.server_address[1])
    sysdir = tmp_path / "out" / "systems" / "svc"
    journal = sysdir / "journal.jsonl"
    proc = subprocess.Popen([*CLI, str(cfg), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 180
        while _journaled(journal) < HOLD_AFTER or len(rag_service.asked) <= HOLD_AFTER:  # the next one is held
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "the run never journaled the answers the server gave"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert _journaled(journal) == HOLD_AFTER  # the server held the next request: nothing more was answered
    assert not (sysdir / "answers.jsonl").exists()
    rag_service.release.set()

    done = subprocess.run([*CLI, str(cfg), "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    n = len(load_dataset("rag").queries)
    # the held request was asked again; no answered query was
    assert len(rag_service.asked) == n + 1 and len(set(rag_service.asked)) == n
    j = Journal(journal)
    assert len(j) == n and j.duplicates == 0
    j.close()
    lines = [json.loads(x) for x in (sysdir / "answers.jsonl").read_text().splitlines()]
    ids = [rec["id"] for rec in lines]
    assert sorted(ids) == sorted(load_dataset("rag").queries) and len(set(ids)) == n
    for rec in lines:  # answers of the killed process's queries are there, as the service gave them
        assert rec["latency"]["retrieval"] == 0.004 and rec["latency"]["generation"] > 0.1
        assert rec["references"] and rec["abstained"] is False and rec["answer"]
    metrics = flat(tmp_path / "out")["svc"]
    assert metrics["attribution"] > 0 and metrics["token_f1"] > 0
    assert metrics["coverage"]["answered"] == n


def test_the_report_splits_answer_metrics_by_answerable_and_shows_latency_by_stage(tmp_path: Path, rag_service):
    from retbench.report.html import render_html
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report

    rag_service.release.set()
    cfg = _config(tmp_path, rag_service.server_address[1])
    done = subprocess.run([*CLI, str(cfg)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "latency by stage" in done.stdout  # the terminal summary shows it too
    ds = load_dataset("rag")
    metrics = flat(tmp_path / "out")["svc"]

    split = metrics["breakdown"]
    assert (split["answerable"]["n"], split["unanswerable"]["n"]) == (22, 6)
    assert split["unanswerable"]["means"]["recall@5"] is None  # retrieval metrics do not apply there
    assert split["unanswerable"]["means"]["abstention_accuracy"] == 0.0  # the service never abstains
    assert split["answerable"]["means"]["token_f1"] == pytest.approx(metrics["token_f1"])

    stages = metrics["latency"]["stages"]
    assert set(stages) == {"search", "retrieval", "generation"}
    assert stages["retrieval"] == pytest.approx(
        {"p50_s": 0.004, "p95_s": 0.004, "mean_s": 0.004, "total_s": 0.004 * 28, "n": 28}
    )
    generation = [0.1 + len(q) / 1000 for q in ds.queries.values()]
    assert stages["generation"]["p95_s"] == pytest.approx(float(np.percentile(generation, 95)))
    assert stages["search"]["n"] == 28 and stages["search"]["p50_s"] > 0

    data = build_report(read_results(tmp_path / "out"))
    md, page = report_markdown(data), render_html(data)
    assert "## Breakdown by group" in md and "| unanswerable | 6 |" in md
    assert "## Latency by stage" in md and "| svc | generation | 28 |" in md
    assert 'id="breakdown"' in page and 'id="stages"' in page
