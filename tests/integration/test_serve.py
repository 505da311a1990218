"""`retbench serve` under load and under bad input, as a real process on 127.0.0.1.

A real `retbench stress` at concurrency 64 against it must record no failures (the stdlib's listen
backlog of 5 reset 11-19% of such connections); bodies that are not a search (`k` of `1e999`, a
deeply nested body) get a 400 that says why, and a client that goes silent is let go after the
server's read timeout. Request counts are bounded; every process is stopped by the test.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from repo_paths import PLUGINS, SRC
from retbench.io.beir import write_beir
from stress_support import scifact_slice, serving


@pytest.fixture(scope="module")
def folder(scifact, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serve") / "slice"
    write_beir(scifact_slice(scifact, n_queries=40, n_other_docs=400), out)
    return out


@pytest.fixture(scope="module")
def server(folder) -> Iterator[str]:
    with serving([str(folder), "--adapter", "bm25s", "--timeout", "2", "--backlog", "256"]) as url:
        assert urllib.parse.urlsplit(url).hostname == "127.0.0.1"
        yield url


def _post(url: str, body: bytes) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_stress_at_concurrency_64_against_serve_records_no_failures(server, folder, tmp_path):
    cfg = {
        "name": "serve-64",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": str(folder), "split": "test"}],
        "systems": [{"name": "serve", "adapter": "http", "params": {"url": server, "retries": 0, "timeout": 120}}],
        "stress": {"levels": [64], "requests": 256, "warmup": 0, "timeout_s": 120, "retries": 0},
    }
    (tmp_path / "stress.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-m", "retbench.cli", "stress", str(tmp_path / "stress.yaml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    failures = tmp_path / "out" / "failures.jsonl"
    assert not failures.exists() or failures.read_text().strip() == ""
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    level = summary["levels"][0]
    assert (level["concurrency"], level["completed"], level["answered"], level["failed"]) == (64, 256, 256, 0)


@pytest.mark.parametrize(
    "body, words",
    [
        (b'{"query": "cells", "k": 1e999}', "'k' must be an integer"),
        (b'{"query": "cells", "k": 2.5}', "'k' must be an integer"),
        (b'{"query": "cells", "k": true}', "'k' must be an integer"),
        (b'{"query": "cells", "k": 100000}', "'k' must be 1..1000, got 100000"),
        (b'{"query": "cells", "k": "3"}', "field 'k' must be an integer 1..1000, got text \"3\""),
        (b'{"query": "cells", "k": null}', "field 'k' must be an integer 1..1000, got NoneType null"),
        (b'{"query": ["cells"], "k": 3}', "'query' must be a string"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"query": "cells", "k": 3', "not JSON"),
        (b"[1, 2]", "JSON object"),
    ],
)
def test_a_bad_body_gets_400_with_a_message_and_the_server_keeps_serving(server, body, words):
    code, answer = _post(server, body)
    assert code == 400 and words in answer["error"]
    code, answer = _post(server, b'{"query": "cells", "k": 3}')
    assert code == 200 and len(answer["retrieved"]) == 3


def test_a_silent_client_is_told_the_deadline_and_disconnected(server):
    parts = urllib.parse.urlsplit(server)
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\n")  # then nothing more
        answer = b""
        while chunk := sock.recv(1024):  # until the server closes the connection (the deadline is 2 s)
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408") and b"within 2 s" in answer


def test_an_idle_keep_alive_connection_is_closed_without_an_unasked_for_answer(server):
    parts = urllib.parse.urlsplit(server)
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        assert sock.recv(1024) == b""  # no request begun: closed at the deadline, nothing sent


def test_a_5000_digit_integer_gets_400_and_the_server_keeps_serving(server):
    code, answer = _post(server, b'{"query": "cells", "k": ' + b"9" * 5000 + b"}")
    assert code == 400 and "an integer of 5000 digits (at most 30 are read)" in answer["error"]
    code, answer = _post(server, b'{"query": "cells", "k": 3}')
    assert code == 200 and len(answer["retrieved"]) == 3


def test_a_drip_feeding_client_is_cut_off_at_the_whole_request_deadline(server):
    """One body byte at a time, each well inside the idle timeout: the deadline (2 s) still ends it."""
    import select

    parts = urllib.parse.urlsplit(server)
    body = b'{"query": "cells", "k": 3}' + b" " * 10_000
    head = f"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        sock.sendall(head)
        answer = b""
        for byte in body:  # a byte whenever the server has said nothing yet: it never waits 2 s for one
            readable, _, _ = select.select([sock], [], [], 0.2)
            if readable:
                answer = sock.recv(4096)
                break
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # the server hung up between two bytes
                break
        else:
            pytest.fail("the server read a 10,000-byte drip-fed body to the end")
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"request not received within 2 s (the server's whole-request deadline)" in answer
    code, answer_after = _post(server, b'{"query": "cells", "k": 3}')
    assert code == 200 and len(answer_after["retrieved"]) == 3


def test_rerank_takes_at_most_max_documents_and_says_the_bound(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    from retbench.retrievers.rerank import create_reranker
    from retbench.serve import RetrievalServer

    with RetrievalServer(reranker=create_reranker("toy_rerankers:Overlap"), max_documents=50) as server:
        code, answer = _post(
            server.rerank_url, json.dumps({"query": "red fox", "documents": ["red fox"] * 51}).encode()
        )
        assert code == 400
        assert answer["error"] == (
            "field 'documents' holds 51 documents; this server reranks at most 50 per request "
            "(retbench serve --max-documents)"
        )
        code, answer = _post(
            server.rerank_url, json.dumps({"query": "red fox", "documents": ["red fox"] * 50}).encode()
        )
        assert code == 200 and len(answer["results"]) == 50


def test_a_query_string_k_is_read_from_its_digits_and_nothing_else(server):
    parts = urllib.parse.urlsplit(server)
    base = f"{parts.scheme}://{parts.netloc}/search?query=cells&k="
    with urllib.request.urlopen(base + "3", timeout=60) as resp:
        assert len(json.loads(resp.read())["retrieved"]) == 3
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(base + "true", timeout=60)
    assert err.value.code == 400 and "field 'k' must be an integer 1..1000" in json.loads(err.value.read())["error"]


@pytest.mark.parametrize(
    "top_n, words",
    [
        ('"1"', "field 'top_n' must be an integer >= 1, got text \"1\""),
        ("true", "field 'top_n' must be an integer >= 1, got bool true"),
        ("1.0", "field 'top_n' must be an integer >= 1, got float 1.0"),
        ("0", "field 'top_n' must be >= 1, got 0"),
    ],
)
def test_rerank_top_n_follows_the_same_integer_rule_as_search_k(monkeypatch, top_n, words):
    monkeypatch.syspath_prepend(str(PLUGINS))
    from retbench.retrievers.rerank import create_reranker
    from retbench.serve import RetrievalServer

    docs = json.dumps(["red fox", "blue whale", "red deer"])
    with RetrievalServer(reranker=create_reranker("toy_rerankers:Overlap")) as server:
        body = f'{{"query": "red fox", "documents": {docs}, "top_n": {top_n}}}'.encode()
        assert _post(server.rerank_url, body) == (400, {"error": words})
        code, answer = _post(server.rerank_url, f'{{"query": "red fox", "documents": {docs}, "top_n": 1}}'.encode())
        assert code == 200 and len(answer["results"]) == 1
