"""A judge reply of megabytes is its own status, `judge_overlong`: not parsed, not cached, and not stored whole.

The call log keeps a prefix of `REPLY_PREFIX_CHARS` characters, `reply_truncated: true`, the full length and the
sha256 of the whole reply, so the call can be audited without a 5 MB line per call. The server is a loopback one
that answers a 5 MB reply on purpose (ending in a valid verdict, which a parser of a cut reply must not find).
"""

from __future__ import annotations

import hashlib
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from http_support import send_json, serving_in_thread
from retbench.llm.client import MAX_REPLY_CHARS, REPLY_PREFIX_CHARS
from retbench.llm.judge import Judge
from retbench.llm.settings import JudgeSettings

HUGE = "thinking... " * 440_000 + '{"grade": 3}'  # 5.3 MB, a well-formed verdict at its very end


class _Rambling(BaseHTTPRequestHandler):
    def do_GET(self):  # /v1/models
        send_json(self, {"object": "list", "data": [{"id": "rambling", "object": "model"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.calls += 1
        reply = HUGE if self.server.calls == 1 else '{"grade": 2}'
        choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
        send_json(self, {"id": "x", "object": "chat.completion", "model": "rambling", "choices": [choice]})

    def log_message(self, *args):
        pass


def test_a_five_megabyte_reply_is_judge_overlong_with_a_prefix_its_length_and_sha256_logged(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Rambling)
    server.calls = 0
    with serving_in_thread(server):
        settings = JudgeSettings.from_config({"base_url": f"http://127.0.0.1:{server.server_port}/v1"})
        judge = Judge(settings, base_url=None, log_path=tmp_path / "calls.jsonl", cache_dir=tmp_path / "cache")
        first = judge.judge([("k", {"query": "q", "passage": "p"})])[0]
        again = judge.judge([("k", {"query": "q", "passage": "p"})])[0]
    assert len(HUGE) > MAX_REPLY_CHARS
    assert first.status == "judge_overlong" and first.value is None  # the verdict at its end is not read
    assert len(first.raw) == REPLY_PREFIX_CHARS
    assert again.status == "ok" and again.value == 2 and not again.cached  # never cached: asked again
    logged = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert logged[0]["status"] == "judge_overlong" and logged[0]["raw"] == HUGE[:REPLY_PREFIX_CHARS]
    assert logged[0]["reply_truncated"] is True and logged[0]["reply_chars"] == len(HUGE)
    assert logged[0]["reply_sha256"] == hashlib.sha256(HUGE.encode()).hexdigest()
    assert f"longer than the {MAX_REPLY_CHARS:,}" in logged[0]["error"]
    assert "reply_truncated" not in logged[1]
    assert (tmp_path / "calls.jsonl").stat().st_size < 100_000
    cached = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*.jsonl"))
    assert b"thinking" not in cached and len(cached) < 10_000
