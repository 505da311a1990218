"""No command that calls out writes or prints a credential, however the far side spells it back.

One real HTTP server on 127.0.0.1 (stdlib http.server in a thread) stands in for every backend retbench
calls: an OpenAI-compatible chat server (the judge, generation and synthetic questions), a `/rerank`
endpoint and an `/v1/embeddings` endpoint. It checks that the credentials arrived (a bearer key from
the environment, the `user:pass@` of the URL, an `?api_key=` query value) and then echoes all of them
back in every spelling servers and serializers use: verbatim, JSON-escaped (`\\/`, and .NET's / Go's
`\\u002B` / `\\u0026` for every punctuation mark), HTML character references (hex `&#x2F;`, decimal,
named, doubly escaped), percent-encoded once (either hex case) and twice, form-encoded, and base64 — in
error bodies (401) and inside successful chat answers, whose text retbench stores (call logs, the
judge cache, answers, a synthetic golden set). Each command runs as a subprocess; then every file it
wrote (results, caches, logs) and both of its streams are searched for each spelling of each secret.
"""

from __future__ import annotations

import base64
import html
import itertools
import json
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from http_support import send_body
from leak_support import run_cli
from retbench.io.beir import write_beir
from retbench.secrets import public_url, redact, register, register_url
from stress_support import scifact_slice

KEY = "sk-EnC/0ded+K3y=&x<y>"  # punctuation every encoder escapes differently
USER, PASSWORD = "alice", "pw/S3cret+Pa$$"
QUERY_SECRET = "qs-T0ken/+=&q"


def spellings(secret: str) -> dict[str, str]:
    """Every way a backend or a serializer may write `secret` back."""
    raw = secret.encode()
    pct = urllib.parse.quote(secret, safe="")

    def per_char(fmt: str) -> str:
        return "".join(c if c.isalnum() or c == "-" else fmt.format(ord(c)) for c in secret)

    return {
        "verbatim": secret,
        "json": json.dumps(secret)[1:-1].replace("/", "\\/"),
        ".NET \\u002B": per_char("\\u{:04X}"),
        "Go \\u0026": json.dumps(secret)[1:-1].replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e"),
        "html hex &#x2F;": per_char("&#x{:X};"),
        "html decimal": per_char("&#{};"),
        "html named": html.escape(secret),
        "html twice": html.escape(html.escape(secret)),
        "percent": pct,
        "percent lower hex": "".join(p.lower() if p.startswith("%") else p for p in _pct_parts(pct)),
        "percent twice": urllib.parse.quote(pct, safe=""),
        "form": urllib.parse.quote_plus(secret, safe=""),
        "base64": base64.b64encode(raw).decode(),
        "base64 url-safe unpadded": base64.urlsafe_b64encode(raw).decode().rstrip("="),
    }


def _pct_parts(text: str) -> list[str]:
    """'%2Fab' -> ['%2F', 'a', 'b'] (so only the hex digits change case)."""
    out, i = [], 0
    while i < len(text):
        step = 3 if text[i] == "%" else 1
        out.append(text[i : i + step])
        i += step
    return out


SECRETS = {"key": KEY, "password": PASSWORD, "query secret": QUERY_SECRET}
NEEDLES = {f"{name} {form}": s for name, secret in SECRETS.items() for form, s in spellings(secret).items()}


def echo(*secrets: str) -> str:
    """What the backend writes back: every spelling of each credential it received."""
    return " | ".join(s for secret in secrets for s in spellings(secret).values())


class _Backend(BaseHTTPRequestHandler):
    """Every backend at once; each answer repeats the credentials it was sent, in every spelling."""

    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, *args) -> None:
        pass

    def _credentials(self) -> list[str]:
        """The credentials this request carried (checked: the ones retbench was given)."""
        auth = self.headers.get("Authorization", "")
        basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        assert auth in (f"Bearer {KEY}", basic)
        got = [KEY] if auth.startswith("Bearer") else [PASSWORD, f"{USER}:{PASSWORD}"]
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if "api_key" in query:
            assert query["api_key"] == [QUERY_SECRET]
            got.append(QUERY_SECRET)
        with self.server.lock:  # type: ignore[attr-defined]
            self.server.seen.add(auth.split()[0])  # type: ignore[attr-defined]
        return got

    def _send(self, code: int, body: str, kind: str = "application/json") -> None:
        send_body(self, body, code, kind)

    def do_GET(self) -> None:  # /v1/models
        self._send(200, json.dumps({"object": "list", "data": [{"id": "echo-model", "object": "model"}]}))

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        echoed = echo(*self._credentials())
        if not urllib.parse.urlsplit(self.path).path.endswith("/chat/completions"):
            return self._send(401, f"unauthorized; you sent: {echoed}", "text/plain")
        with self.server.lock:  # type: ignore[attr-defined]
            n = next(self.server.calls)  # type: ignore[attr-defined]
        if n % 3 == 2:  # every third call fails, echoing the credentials in its error body
            return self._send(401, json.dumps({"error": {"message": f"bad credentials: {echoed}"}}))
        reply = {"grade": 1, "question": f"what is {echoed}?", "evidence": echoed}
        content = f"You sent {echoed}. " + json.dumps(reply)
        self._send(
            200,
            json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "model": "echo-model",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
            ),
        )


@pytest.fixture(scope="module")
def backend() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Backend)
    srv.daemon_threads = True
    srv.lock, srv.calls, srv.seen = threading.Lock(), itertools.count(), set()  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)


def _base(srv: ThreadingHTTPServer, userinfo: bool = False) -> str:
    cred = f"{USER}:{urllib.parse.quote(PASSWORD, safe='')}@" if userinfo else ""
    return f"http://{cred}127.0.0.1:{srv.server_address[1]}"


@pytest.fixture(scope="module")
def data(scifact, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("beir") / "slice"
    write_beir(scifact_slice(scifact, n_queries=4, n_other_docs=10), folder)
    return folder


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(tmp_path, *args, env={"RB_ENC_KEY": KEY})


def _leaks(tmp_path: Path, proc: subprocess.CompletedProcess) -> list[str]:
    """'<secret> <spelling> in <where>' for every spelling found in a stream or any file under tmp_path."""
    texts = {"stdout": proc.stdout, "stderr": proc.stderr}
    for p in tmp_path.rglob("*"):
        if p.is_file() and p.suffix not in (".npy", ".trec", ".yaml"):  # arrays and ranked ids; the configs are ours
            texts[str(p.relative_to(tmp_path))] = p.read_bytes().decode("utf-8", "replace")
    return [f"{name} in {where}" for where, text in texts.items() for name, s in NEEDLES.items() if s in text]


def _written(tmp_path: Path, proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr + "".join(p.read_text("utf-8", "replace") for p in tmp_path.rglob("*.json*"))


def test_every_spelling_is_masked_and_the_text_around_it_kept():
    for secret in SECRETS.values():
        register(secret)
    for name, spelled in NEEDLES.items():
        assert redact(f"before {spelled} after") == "before *** after", name
    # a URL's password and a secret-looking query value are masked even when nobody registered them
    assert redact("see https://bob:hunter22@db.example/x?api_key=abc123&q=1") == (
        "see https://bob:***@db.example/x?api_key=***&q=1"
    )
    assert redact("http:\\/\\/bob:hunter22@db") == "http:\\/\\/bob:***@db"  # the same URL inside a JSON string
    assert public_url("https://bob:hunter22@db.example:5432/x?api_key=abc123&q=1") == (
        "https://db.example:5432/x?api_key=***&q=1"
    )
    assert register_url("postgresql://u:pw-9876@localhost/db") == "postgresql://localhost/db"
    assert redact("the password pw-9876 alone") == "the password *** alone"
    assert redact("dsn: host=db user=u password=hunter22 dbname=x") == "dsn: host=db user=u password=*** dbname=x"
    ordinary = "50% of 3 & 4 are <b>&amp; 100%; key=value; http://example.com/a?q=1&page=2"
    assert redact(ordinary) == ordinary  # nothing secret: nothing changes


def test_judge_calibrate_judge_relevance_and_synth_write_no_credential(backend, data, tmp_path):
    judge = {"judge": {"base_url": _base(backend, userinfo=True), "retries": 0, "max_tokens": 8}}
    (tmp_path / "judge.yaml").write_text(yaml.safe_dump(judge))
    keyed = {"judge": {**judge["judge"], "base_url": _base(backend), "api_key_env": "RB_ENC_KEY"}}
    (tmp_path / "judge_key.yaml").write_text(yaml.safe_dump(keyed))
    cal = {
        "dataset": str(data),
        "judge": keyed["judge"],
        "sample": {"relevant": 2, "nonrelevant": 2, "nonrelevant_depth": 3},
        "spot_check": 1,
        "bootstrap": 50,
        "output": str(tmp_path / "cal"),
    }
    (tmp_path / "cal.yaml").write_text(yaml.safe_dump(cal))
    runs = tmp_path / "r.trec"
    runs.write_text("".join(f"{q} Q0 {d} {r} {1.0 / r} x\n" for q, d, r in _pool(data)))

    procs = [
        _cli(tmp_path, "judge-calibrate", str(tmp_path / "cal.yaml")),
        _cli(tmp_path, "judge-relevance", str(runs), "--judge", str(tmp_path / "judge.yaml"), "--dataset", str(data),
             "--depth", "3", "--output", str(tmp_path / "labels")),
        _cli(tmp_path, "synth", str(data), "--judge", str(tmp_path / "judge_key.yaml"), "--n", "3",
             "--output", str(tmp_path / "synthetic.jsonl")),
    ]  # fmt: skip
    for proc in procs:
        assert proc.returncode in (0, 3), proc.stderr  # some calls fail on purpose (401), none crash
        assert _leaks(tmp_path, proc) == []
    assert backend.seen >= {"Bearer", "Basic"}  # the key and the URL's userinfo were sent
    written = "".join(_written(tmp_path, p) for p in procs)
    assert "***" in written and "HTTP 401" in written  # answers and errors are recorded, masked
    assert (tmp_path / "labels" / "judge_calls.jsonl").is_file() and (tmp_path / "synthetic.jsonl").is_file()
    assert any((tmp_path / "cache").rglob("*.jsonl"))  # the judge cache was written (and searched)
    assert "127.0.0.1" in written and f"{USER}:" not in written  # the public URL is shown, without userinfo


def _pool(data: Path) -> list[tuple[str, str, int]]:
    """Three documents per query, the judged one first: something to pool for judge-relevance."""
    qrels = [line.split("\t") for line in (data / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    docs = [json.loads(line)["_id"] for line in (data / "corpus.jsonl").read_text().splitlines()]
    out = []
    for q, d, _ in qrels:
        others = [x for x in docs if x != d][:2]
        out += [(q, d, 1), (q, others[0], 2), (q, others[1], 3)]
    return out


def test_run_with_generation_an_http_reranker_and_an_http_encoder_writes_no_credential(backend, data, tmp_path):
    llm = {"base_url": _base(backend, userinfo=True), "retries": 0, "max_tokens": 8}
    rerank_url = f"{_base(backend)}/rerank?api_key={urllib.parse.quote(QUERY_SECRET, safe='')}"
    cfg = {
        "name": "secrets",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": str(data), "split": "test"}],
        "systems": [
            {"name": "gen", "adapter": "bm25s", "generate": {"llm": llm, "context_k": 1}},
            {
                "name": "rr",
                "adapter": "bm25s",
                "rerank": {"kind": "http", "depth": 10, "url": rerank_url, "api_key_env": "RB_ENC_KEY"},
            },
            {
                "name": "api",
                "adapter": "dense",
                "params": {
                    "encoder": {
                        "kind": "http",
                        "url": f"{_base(backend, userinfo=True)}/v1/embeddings",
                        "model": "e5",
                        "retries": 0,
                    }
                },
            },
        ],
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    proc = _cli(tmp_path, "run", str(tmp_path / "cfg.yaml"))
    assert proc.returncode in (0, 3), proc.stderr
    assert _leaks(tmp_path, proc) == []
    written = _written(tmp_path, proc)
    assert "***" in written and "HTTP 401" in written
    assert (tmp_path / "out" / "systems" / "gen" / "generate_calls.jsonl").is_file()


def test_the_http_reranker_and_encoder_errors_carry_no_credential(backend, monkeypatch):
    """What `serve --rerank http` would hand its client, and what a cell records: the error text itself."""
    from retbench.retrievers.encoders.http import HttpEncoder
    from retbench.retrievers.rerank.scorers import HttpReranker

    monkeypatch.setenv("RB_ENC_KEY", KEY)
    rerank_url = f"{_base(backend)}/rerank?api_key={urllib.parse.quote(QUERY_SECRET, safe='')}"
    reranker = HttpReranker(rerank_url, api_key_env="RB_ENC_KEY")
    encoder = HttpEncoder(f"{_base(backend, userinfo=True)}/v1/embeddings", "e5", retries=0, cache=False)
    errors = []
    for call in (lambda: reranker.score("q", ["a", "b"]), lambda: encoder.encode(["a"], "query")):
        with pytest.raises(RuntimeError) as info:
            call()
        errors.append(str(info.value))
    assert all("HTTP 401" in e and "***" in e for e in errors)
    assert [name for name, s in NEEDLES.items() for e in errors if s in e] == []
    shown = json.dumps([reranker.describe(), encoder.describe()])
    assert "api_key=***" in shown and f"{USER}:" not in shown and QUERY_SECRET not in shown
