"""No piece of a key reaches a file or a stream, on any path, whatever form a hostile backend echoes it in.

One real HTTP server on 127.0.0.1 plays every backend (an OpenAI-compatible LLM, a retrieval endpoint,
a `/rerank` endpoint, an embeddings endpoint). It checks the key arrived (`Authorization: Bearer KEY`)
and echoes it back in one of these forms:

- in an error body (401): verbatim; near the cuts error texts get (200 and 300 characters); JSON
  `\\u`-escaped across both cuts; base64 of the whole `Authorization` header at each offset; split by a
  newline; split by a JSON `\\n` escape;
- from the LLM endpoint only, in a 200 answer: a reply whose JSON holds the key split by `\\n`; an SSE
  error event; an error object, both with the key near the 300-character cut.

The forms are parametrised in-process against each client (the LLM client, the http store, reranker
and encoder): what each keeps of an error, and what the one writer puts in a call log. Then each path
runs as a subprocess (judge-relevance, synth, run with generation + http store + reranker, stress, a
pgvector store whose dsn carries a password) against a server that cycles through every form, and
every file it wrote (results, call logs, caches) and both streams are searched for any 6-character
piece of the key in any encoding (`leak_support`).
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import json
import subprocess
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from http_support import send_body, send_json, serving_in_thread
from leak_support import files_under, leaks, run_cli, u_escaped
from retbench.io.beir import write_beir
from retbench.io.files import AppendLog
from retbench.loopback import free_port
from stress_support import scifact_slice

KEY = "sk-Rb7Qz2X9wK4mT6vL8nPy3Hd5Jc1"
PG_PASSWORD = "Pg-Xq7vR2mK9sW4zT"
SECRETS = {"key": KEY, "pg password": PG_PASSWORD}
N_QUERIES = 10


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def near_cut(key: str, shift: int = 0) -> str:
    """Two copies of the key, 13 characters of each before the 200- and the 300-character cut."""
    text = "unauthorized: " + "." * (187 - shift - 14)
    text += key + "." * (287 - shift - len(text) - len(key)) + key
    return text + " (end)"


ERROR_FORMS: dict[str, Callable[[str], str]] = {
    "plain": lambda k: f"unauthorized: you sent {k}",
    "near the cut": near_cut,
    "\\u-escaped": lambda k: '{"error": "' + "." * 140 + u_escaped(k) + '"}',
    "base64 of the header": lambda k: " / ".join(
        _b64(f"Authorization:{sep}Bearer {k}") for sep in ("", " ", "  ")
    ),  # offsets 0, 1 and 2 of the key in base64
    "split by a newline": lambda k: f"unauthorized:\n{k[:14]}\n{k[14:]}\n",
    "split by a JSON \\n": lambda k: json.dumps({"error": f"bad key {k[:14]}\n{k[14:]}"}),
}
REPLY_FORMS = ("JSON \\n inside a reply", "SSE error event", "error object in a 200 body")
LLM_FORMS = (*ERROR_FORMS, *REPLY_FORMS)


def _completion(content: str) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "echo",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


class _Hostile(BaseHTTPRequestHandler):
    """`/<form>/...` answers in that form; `/<path>/...` cycles through the forms, one per call."""

    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # /v1/models
        send_json(self, {"object": "list", "data": [{"id": "echo", "object": "model"}]})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        path = urllib.parse.urlsplit(self.path).path
        prefix = urllib.parse.unquote(path.split("/")[1])
        llm = path.endswith("/chat/completions")
        if prefix == "embed":  # a working embeddings endpoint (the pgvector path needs vectors)
            vectors = [[1.0, float(len(t) % 7), float(i % 3), 0.5] for i, t in enumerate(request["input"])]
            return send_json(self, {"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]})
        assert self.headers.get("Authorization") == f"Bearer {KEY}"  # the key was sent
        forms = LLM_FORMS if llm else tuple(ERROR_FORMS)
        with self.server.lock:  # type: ignore[attr-defined]
            n = self.server.calls[prefix]  # type: ignore[attr-defined]
            self.server.calls[prefix] += 1  # type: ignore[attr-defined]
        form = prefix if prefix in LLM_FORMS else forms[n % len(forms)]
        if form in ERROR_FORMS:
            return send_body(self, ERROR_FORMS[form](KEY), 401)
        if form == "SSE error event":  # the error object's repr puts the message 13 characters in
            event = {"error": {"message": near_cut(KEY, shift=13), "type": "auth"}}
            return send_body(self, f"data: {json.dumps(event)}\n\n", kind="text/event-stream")
        if form == "error object in a 200 body":
            return send_json(self, {"error": near_cut(KEY)})
        reply = {"grade": 1, "question": f"is {KEY[:14]}\n{KEY[14:]} valid?", "reason": f"{KEY[:10]}\n{KEY[10:]}"}
        send_json(self, _completion(f"Relevant.\n{KEY[:16]}\n{KEY[16:]}\n" + json.dumps(reply)))


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    srv.daemon_threads = True
    srv.lock, srv.calls = threading.Lock(), collections.Counter()  # type: ignore[attr-defined]
    with serving_in_thread(srv):
        yield srv


@pytest.fixture(scope="module")
def hostile(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def data(scifact, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("beir") / "slice"
    write_beir(scifact_slice(scifact, n_queries=N_QUERIES, n_other_docs=20), folder)
    return folder


# ---- each form against each client, in process ----------------------------------------------------


@pytest.mark.parametrize("form", LLM_FORMS)
def test_the_llm_client_and_its_call_log_keep_no_piece_of_the_key(form, hostile, tmp_path, monkeypatch):
    from retbench.llm.client import ChatClient
    from retbench.llm.settings import JudgeSettings

    monkeypatch.setenv("RB_PATH_KEY", KEY)
    settings = JudgeSettings(base_url=f"{hostile}/{urllib.parse.quote(form)}", api_key_env="RB_PATH_KEY", retries=0)
    out = ChatClient(settings).chat([{"role": "user", "content": "grade this"}], model="echo")
    log = tmp_path / "calls.jsonl"
    AppendLog(log).write(dataclasses.asdict(out))  # what the judge, generation and synth call logs write
    kept = {"error": out.error or "", "attempts": json.dumps(out.attempts), "call log": log.read_text()}
    assert leaks(kept, SECRETS) == []
    if form == "JSON \\n inside a reply":
        assert out.status == "ok" and KEY[:14] in out.text  # the answer itself is whole in memory
    else:
        assert out.status == "judge_error" and "***" in out.error
    assert "***" in kept["call log"]


@pytest.mark.parametrize("form", ERROR_FORMS)
def test_the_http_store_reranker_and_encoder_keep_no_piece_of_the_key(form, hostile, monkeypatch):
    from retbench.retrievers.base import create
    from retbench.retrievers.encoders.http import HttpEncoder
    from retbench.retrievers.rerank.scorers import HttpReranker

    monkeypatch.setenv("RB_PATH_KEY", KEY)
    base = f"{hostile}/{urllib.parse.quote(form)}"
    store = create("http", {"url": f"{base}/search", "auth_env": "RB_PATH_KEY", "retries": 0})
    errors = [store.ask("a query", 5).error or ""]
    reranker = HttpReranker(f"{base}/rerank", api_key_env="RB_PATH_KEY")
    encoder = HttpEncoder(f"{base}/v1/embeddings", "e5", api_key_env="RB_PATH_KEY", retries=0, cache=False)
    for call in (lambda: reranker.score("q", ["a", "b"]), lambda: encoder.encode(["a"], "query")):
        with pytest.raises(RuntimeError) as info:
            call()
        errors.append(str(info.value))
    assert all("HTTP 401" in e and "***" in e for e in errors), errors
    assert leaks(dict(enumerate(map(str, errors))), SECRETS) == []


# ---- each path end to end, as a subprocess ------------------------------------------------------


def _cli(tmp_path: Path, *args: str, columns: int = 70) -> subprocess.CompletedProcess:
    # narrow: long error cells wrap across lines; wide: a cell is shown whole
    return run_cli(tmp_path, *args, env={"RB_PATH_KEY": KEY, "COLUMNS": str(columns)})


def _llm(url: str) -> dict:
    return {"base_url": url, "api_key_env": "RB_PATH_KEY", "retries": 0, "max_tokens": 16, "concurrency": 2}


def _experiment(tmp_path: Path, data: Path, systems: list[dict], **extra) -> Path:
    cfg = {
        "name": "paths",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": str(data), "split": "test"}],
        "systems": systems,
        **extra,
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _store(url: str) -> dict:
    return {"name": "svc", "adapter": "http", "params": {"url": url, "auth_env": "RB_PATH_KEY", "retries": 0}}


def _judge_relevance(tmp_path: Path, data: Path, hostile: str) -> tuple[list[str], list[str]]:
    (tmp_path / "judge.yaml").write_text(yaml.safe_dump({"judge": _llm(f"{hostile}/judge")}))
    qrels = [line.split("\t") for line in (data / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    docs = [json.loads(line)["_id"] for line in (data / "corpus.jsonl").read_text().splitlines()]
    (tmp_path / "r.trec").write_text("".join(f"{q} Q0 {d} 1 1.0 x\n{q} Q0 {docs[0]} 2 0.5 x\n" for q, d, _ in qrels))
    args = ["judge-relevance", "r.trec", "--judge", "judge.yaml", "--dataset", str(data), "--depth", "2"]
    return [*args, "--output", "labels"], ["labels/judge_calls.jsonl"]


def _synth(tmp_path: Path, data: Path, hostile: str) -> tuple[list[str], list[str]]:
    (tmp_path / "judge.yaml").write_text(yaml.safe_dump({"judge": _llm(f"{hostile}/synth")}))
    return ["synth", str(data), "--judge", "judge.yaml", "--n", "12", "--output", "synthetic.jsonl"], []


def _run(tmp_path: Path, data: Path, hostile: str) -> tuple[list[str], list[str]]:
    systems = [
        {"name": "gen", "adapter": "bm25s", "generate": {"llm": _llm(f"{hostile}/gen"), "context_k": 1}},
        _store(f"{hostile}/store/search"),
        {
            "name": "rr",
            "adapter": "bm25s",
            "rerank": {"kind": "http", "depth": 10, "url": f"{hostile}/rerank/x", "api_key_env": "RB_PATH_KEY"},
        },
    ]
    cfg = _experiment(tmp_path, data, systems)
    return ["run", str(cfg)], ["out/systems/gen/generate_calls.jsonl", "out/systems/svc/status.jsonl"]


def _stress(tmp_path: Path, data: Path, hostile: str) -> tuple[list[str], list[str]]:
    stress = {"levels": [2], "requests": 2 * len(ERROR_FORMS), "warmup": 0, "timeout_s": 10, "retries": 0}
    cfg = _experiment(tmp_path, data, [_store(f"{hostile}/stress/search")], stress=stress)
    return ["stress", str(cfg)], []


def _pgvector(tmp_path: Path, data: Path, hostile: str) -> tuple[list[str], list[str]]:
    dsn = f"postgresql://postgres:{PG_PASSWORD}@127.0.0.1:{free_port()}/postgres?connect_timeout=10"  # refused
    encoder = {"kind": "http", "url": f"{hostile}/embed/v1/embeddings", "model": "e5", "retries": 0}
    system = {"name": "pg", "adapter": "pgvector", "params": {"dsn": dsn, "encoder": encoder}}
    return ["run", str(_experiment(tmp_path, data, [system])), "--quiet"], []


PATHS = {
    "judge-relevance (judge log, judge cache)": ("judge", _judge_relevance, 70),
    "synth (synth call log, golden set)": ("synth", _synth, 70),
    "run (generation log, answers, journal, status, done, summary, reports, console table)": ("gen", _run, 70),
    "stress (failures, summary, report)": ("stress", _stress, 70),
    "pgvector dsn with a password (console table, metrics)": ("", _pgvector, 400),
    "pgvector dsn, a narrow console": ("", _pgvector, 50),
}


@pytest.mark.parametrize("path", PATHS)
def test_no_file_or_stream_of_a_path_holds_a_piece_of_the_key(path, server, hostile, data, tmp_path):
    prefix, build, columns = PATHS[path]
    args, logs = build(tmp_path, data, hostile)
    proc = _cli(tmp_path, *args, columns=columns)
    assert proc.returncode in (0, 3), proc.stderr  # calls fail on purpose; nothing crashes
    texts = {"stdout": proc.stdout, "stderr": proc.stderr, **files_under(tmp_path)}
    assert leaks(texts, SECRETS) == []
    for log in logs:
        assert "***" in (tmp_path / log).read_text()  # the echoes were recorded, masked
    if prefix:  # every form was served on this path at least once
        assert server.calls[prefix] >= len(LLM_FORMS if prefix in ("judge", "synth", "gen") else ERROR_FORMS)
    else:
        assert proc.returncode == 3
        named = "cannot use PostgreSQL at postgresql://127.0.0.1:"  # the store and its host, no password
        assert named in proc.stderr and named in (tmp_path / "out" / "metrics.json").read_text()
        if columns > 200:  # the results table shows the whole error cell
            assert named in proc.stdout
