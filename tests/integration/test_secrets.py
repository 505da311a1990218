"""Secrets never reach a file or stream retbench writes, in any encoding a backend echoes them in.

A real HTTP server on 127.0.0.1 (stdlib http.server, started and stopped here) rejects every request
and echoes the credentials it received in its error body: verbatim, JSON-escaped (`tok\\/SECRET`),
URL-encoded (both hex cases), base64 of `user:pass`, HTML-escaped, and verbatim straddling the
200-character cut retbench applies to error bodies. `retbench run` and `retbench stress` run against it
as subprocesses; then every file under the output folder and both streams are searched for each form.
"""

from __future__ import annotations

import base64
import html
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from repo_paths import SRC, SUPPORT
from retbench.errors import ConfigError
from retbench.io.beir import write_beir
from retbench.retrievers.base import create
from retbench.secrets import clip, public_url, redact, register
from stress_support import scifact_slice

TOKEN = "tok/SECRET+v4l=ue&x"
USERPASS = "alice:pa ss/w0rd"


def forms(secret: str) -> dict[str, str]:
    raw = secret.encode()
    quoted = urllib.parse.quote(secret, safe="")
    return {
        "raw": secret,
        "json-escaped": secret.replace("/", "\\/"),
        "url-encoded": quoted,
        "url-encoded lower hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quoted),
        "form-encoded": urllib.parse.quote_plus(secret, safe=""),
        "base64": base64.b64encode(raw).decode(),
        "html": html.escape(secret),
    }


FORMS = {f"token {k}": v for k, v in forms(TOKEN).items()} | {f"user:pass {k}": v for k, v in forms(USERPASS).items()}
PREFIX = TOKEN[:8]  # what a cut at the truncation boundary would leave


class _Echo(BaseHTTPRequestHandler):
    """Refuses every request with a 401 whose body echoes the credentials in one of the forms."""

    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:  # type: ignore[attr-defined]
            name = next(self.server.order)  # type: ignore[attr-defined]
        got = self.headers.get("Authorization", "").removeprefix("Bearer ")
        basic = self.headers.get("X-Basic", "")
        assert got == TOKEN and basic == USERPASS  # the secrets were sent
        lead = f"{name}: {FORMS[name]} "
        body = lead + "." * (195 - len(lead)) + TOKEN + " " + json.dumps({"auth": got})  # the token straddles 200
        data = body.encode()
        self.send_response(401)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def echo_server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    srv.daemon_threads = True
    srv.lock, srv.order = threading.Lock(), itertools.cycle(FORMS)  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        assert srv.server_address[0] == "127.0.0.1"
        yield f"http://127.0.0.1:{srv.server_address[1]}/search"
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def data(scifact, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("beir") / "slice"
    write_beir(scifact_slice(scifact, n_queries=len(FORMS) + 2, n_other_docs=20), folder)
    return folder


def _config(tmp_path: Path, url: str, data: Path, **extra) -> Path:
    system = {
        "name": "svc",
        "adapter": "http",
        "params": {
            "url": url,
            "auth_env": "RB_SECRET_TOKEN",
            "headers_env": {"X-Basic": "RB_SECRET_BASIC"},
            "headers": {"X-Tenant": "team-a"},
            "retries": 0,
            "concurrency": 2,
        },
    }
    cfg = {
        "name": "secrets",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": str(data), "split": "test"}],
        "systems": [system],
        **extra,
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
        "RB_SECRET_TOKEN": TOKEN,
        "RB_SECRET_BASIC": USERPASS,
    }
    return subprocess.run(
        [sys.executable, "-m", "retbench.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


def _leaks(texts: dict[str, str]) -> list[str]:
    needles = {**FORMS, "token prefix at the cut": PREFIX, "password": USERPASS.split(":", 1)[1]}
    return [f"{form} in {where}" for where, text in texts.items() for form, s in needles.items() if s in text]


def _everything(out: Path, proc: subprocess.CompletedProcess) -> dict[str, str]:
    texts = {"stdout": proc.stdout, "stderr": proc.stderr}
    for p in out.rglob("*"):
        if p.is_file():
            texts[str(p.relative_to(out))] = p.read_bytes().decode("utf-8", "replace")
    return texts


def test_retbench_run_writes_no_secret_in_any_encoding(echo_server, data, tmp_path):
    proc = _cli("run", str(_config(tmp_path, echo_server, data)), "--quiet")
    assert proc.returncode == 3, proc.stderr
    texts = _everything(tmp_path / "out", proc)
    assert any("status.jsonl" in k for k in texts) and "manifest.json" in texts
    assert "HTTP 401" in "".join(texts.values()) and "***" in "".join(texts.values())  # errors are recorded, masked
    assert _leaks(texts) == []
    assert "RB_SECRET_BASIC" in texts["manifest.json"]  # the variable's name is recorded, never its value


def test_retbench_stress_writes_no_secret_in_any_encoding(echo_server, data, tmp_path):
    stress = {"stress": {"levels": [2], "requests": 2 * len(FORMS), "warmup": 0, "timeout_s": 5, "retries": 0}}
    proc = _cli("stress", str(_config(tmp_path, echo_server, data, **stress)))
    assert proc.returncode == 3, proc.stderr
    texts = _everything(tmp_path / "out", proc)
    assert any("failures.jsonl" in k for k in texts)
    assert "HTTP 401" in "".join(texts.values())
    assert _leaks(texts) == []


def test_redaction_happens_before_the_cut():
    register("zz-secret-value-42")
    text = "x" * 195 + "zz-secret-value-42 tail"
    assert "zz-se" not in clip(text, 200) and clip(text, 200).startswith("x" * 195 + "***")
    assert redact('{"k": "zz-secret-value-42"}') == '{"k": "***"}'
    assert redact(base64.b64encode(b"zz-secret-value-42").decode()) == "***"


def test_credentials_in_the_url_and_literal_secret_headers_are_config_errors():
    with pytest.raises(ConfigError, match="url carries credentials"):
        create("http", {"url": "http://user:pass@127.0.0.1:1/search"})
    with pytest.raises(ConfigError, match="looks like a credential"):
        create("http", {"url": "http://127.0.0.1:1/search", "headers": {"X-Api-Key": "abc"}})
    with pytest.raises(ConfigError, match="looks like a credential"):
        create("http", {"url": "http://127.0.0.1:1/search", "headers": {"X-Forward": "Bearer abcdef"}})
    ok = create("http", {"url": "http://127.0.0.1:1/search", "headers": {"X-Tenant": "team-a"}})
    assert ok.describe()["headers"] == ["X-Tenant"] and "team-a" not in json.dumps(ok.describe())
    assert public_url("http://u:p@host:8080/x?q=1") == "http://host:8080/x?q=1"
