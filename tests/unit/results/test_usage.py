"""Tokens, cost and latency by stage of a RAG benchmark, from `retbench run` to metrics.json and the report.

The chat endpoint is a loopback server the test starts that answers in the documented non-streaming
OpenAI chat-completion shape with a fixed `usage` (so token counts, and the cost at the configured
prices, are known exactly); the retriever (bm25s) and the golden set (`corpora/rag`) are the real ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from http_support import send_json, serving_in_thread
from retbench.report.markdown import report_markdown
from retbench.report.model import build_report
from retbench.results import read_results
from retbench.studies.benchmark import load_config, run_experiment

PROMPT_TOKENS, COMPLETION_TOKENS = 120, 6


class _Chat(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # /v1/models
        send_json(self, {"object": "list", "data": [{"id": "replay-model", "object": "model"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        message = {"role": "assistant", "content": "It says so in [1]."}
        send_json(
            self,
            {
                "id": "x",
                "object": "chat.completion",
                "model": "replay-model",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": PROMPT_TOKENS,
                    "completion_tokens": COMPLETION_TOKENS,
                    "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
                },
            },
        )

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def chat_url() -> Iterator[str]:
    with serving_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Chat)) as server:
        yield f"http://127.0.0.1:{server.server_port}/v1"


def test_generation_tokens_and_cost_are_summed_from_the_call_log_and_cache_hits_cost_nothing(
    tmp_path: Path, chat_url: str, monkeypatch
) -> None:
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    llm = {"base_url": chat_url, "price_input_per_1k": 0.5, "price_output_per_1k": 2.0, "retries": 0}
    cfg = {
        "name": "rag-cost",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["recall@5", "attribution", "abstention_accuracy"],
        "datasets": [{"name": "rag", "split": "test"}],
        "systems": [{"name": "bm25", "adapter": "bm25s", "generate": {"llm": llm, "context_k": 2}}],
    }
    path = tmp_path / "rag.yaml"
    path.write_text(yaml.safe_dump(cfg))
    n = 28
    cost = n * (PROMPT_TOKENS / 1000 * 0.5 + COMPLETION_TOKENS / 1000 * 2.0)

    run_experiment(load_config(path), log=lambda m: None)
    row = read_results(tmp_path / "out")["bm25"]
    assert row.usage == {
        "generate": {
            "calls": n,
            "cached": 0,
            "input_tokens": n * PROMPT_TOKENS,
            "output_tokens": n * COMPLETION_TOKENS,
            "tokens_estimated": False,
            "cost": pytest.approx(cost),
        }
    }
    stages = row.latency["stages"]
    assert set(stages) == {"search", "retrieval", "generation"} and stages["generation"]["n"] == n
    assert row.latency["suite_seconds"] > 0
    assert row.breakdown is not None
    assert row.value("attribution") == row.breakdown["answerable"]["means"]["attribution"]  # cites its top passage

    run_experiment(load_config(path), force=True, log=lambda m: None)  # every answer now comes from the cache
    again = read_results(tmp_path / "out")["bm25"]
    assert again.usage is not None
    usage = again.usage["generate"]
    assert (usage["calls"], usage["cached"], usage["cost"]) == (n, n, pytest.approx(cost))
    assert again.latency["stages"]["generation"]["p95_s"] == 0.0  # a cached generation takes no time

    md = report_markdown(build_report(read_results(tmp_path / "out")))
    assert "## LLM tokens and cost" in md
    assert f"| bm25 | generate | {n} | {n} | 3,360 | 168 | {cost:.6f} |" in md
