"""A run whose judge answers but never readably exits 3 and says how many replies were unparseable;
a run where only some replies are unparseable exits 0 and says so. The judge is a loopback server that
misbehaves on purpose (an OpenAI-compatible /v1/chat/completions)."""

from __future__ import annotations

import itertools
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from http_support import send_json, serving_in_thread
from retbench.cli import app

DOCS = [
    {"_id": "fees", "title": "", "text": "We are cutting credit card late fees from $32 to $8."},
    {"_id": "jobs", "title": "", "text": "Fifteen million new jobs in just three years."},
    {"_id": "rail", "title": "", "text": "The rail line opens to passengers next spring."},
]
GOLDEN = {
    "samples": [
        {"id": "a1", "input": "What were late fees cut to?", "expected_output": ["fees"]},
        {"id": "a2", "input": "How many new jobs?", "expected_output": ["jobs"]},
    ]
}


def _judge_server(replies: Any) -> ThreadingHTTPServer:
    """Answers each chat call with the next of `replies` (an iterator of message contents)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            send_json(self, {"object": "list", "data": [{"id": "judge", "object": "model"}]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            content = next(replies)
            choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            send_json(self, {"object": "chat.completion", "model": "judge", "choices": [choice]})

        def log_message(self, *args: Any) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


def _run(tmp_path: Path, monkeypatch: Any, replies: Any) -> Any:
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "tiny_rag"
    data.mkdir()
    (data / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (data / "golden.yaml").write_text(yaml.safe_dump(GOLDEN))
    with serving_in_thread(_judge_server(replies)) as server:
        cfg = {
            "name": "judged",
            "output": str(tmp_path / "out"),
            "depth": 3,
            "metrics": ["recall@1", "context_precision"],
            "datasets": [{"name": str(data), "split": "test"}],
            "systems": [{"name": "bm25", "adapter": "bm25s"}],
            "judge": {"base_url": f"http://127.0.0.1:{server.server_port}", "retries": 0},
            "judging": {"context_k": 2},
        }
        (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
        return CliRunner().invoke(app, ["run", str(tmp_path / "cfg.yaml"), "--quiet"])


def test_a_run_where_every_judge_reply_is_unparseable_exits_3_naming_how_many(tmp_path, monkeypatch):
    res = _run(tmp_path, monkeypatch, itertools.repeat("I think it is relevant, probably."))
    assert res.exit_code == 3, res.output
    calls = tmp_path / "out" / "systems" / "bm25" / "judge_calls.jsonl"
    n = len(calls.read_text().splitlines())
    assert n >= 2
    assert f"bm25: no judging call gave a verdict: {n} of {n} replies unparseable ({n} unparseable" in res.output
    assert "Traceback" not in res.output
    assert (tmp_path / "out" / "metrics.json").is_file()  # work done is kept


def test_a_run_where_some_judge_replies_are_unparseable_exits_0_and_says_how_many(tmp_path, monkeypatch):
    res = _run(tmp_path, monkeypatch, itertools.chain(["not json"], itertools.repeat('{"relevant": true}')))
    assert res.exit_code == 0, res.output
    calls = tmp_path / "out" / "systems" / "bm25" / "judge_calls.jsonl"
    n = len(calls.read_text().splitlines())
    assert f"note: bm25: 1 of {n} judging calls gave no verdict (1 unparseable); they are counted" in res.output


def test_judge_relevance_where_every_reply_is_unparseable_exits_3(tmp_path, monkeypatch):
    from retbench.io.datasets import load_dataset

    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    ds = load_dataset("scifact", ["test"])
    qids = [q for q in ds.split("test") if q in ds.queries][:2]
    docs = list(ds.corpus.ids)[:2]
    (tmp_path / "bm25.trec").write_text(
        "".join(f"{q} Q0 {d} {r} {3 - r}.0 bm25\n" for q in qids for r, d in enumerate(docs, 1))
    )
    with serving_in_thread(_judge_server(itertools.repeat("maybe?"))) as server:
        (tmp_path / "judge.yaml").write_text(
            f"judge: {{base_url: 'http://127.0.0.1:{server.server_port}', retries: 0}}\n"
        )
        args = ["judge-relevance", str(tmp_path / "bm25.trec"), "--judge", str(tmp_path / "judge.yaml")]
        args += ["--dataset", "scifact", "--max-queries", "2", "--depth", "2", "--output", str(tmp_path / "labels")]
        res = CliRunner().invoke(app, args)
    assert res.exit_code == 3, res.output
    assert "no judge reply gave a verdict: 4 of 4 replies unparseable" in res.output
