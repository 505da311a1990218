"""A small client for OpenAI-compatible chat endpoints (`POST /v1/chat/completions`, `GET /v1/models`).

Standard library only (urllib), so judging adds no dependency. Both answer shapes are read: a JSON
body (`choices[0].message.content`) and server-sent events (`data: {...}` lines with
`choices[0].delta.content`, ended by `data: [DONE]`), whatever was asked for, because some servers
always stream. Failed attempts are retried with exponential backoff (`backoff * 2**i` seconds) and
every failed attempt is recorded; what is left after the last retry is a status (`judge_error` or
`judge_timeout`), never an exception and never a number.

Token counts come from the server's `usage` when it reports one; otherwise they are estimated as
characters / 4 (the usual rule of thumb for English) and marked `tokens_estimated`.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from retbench.llm.settings import JudgeSettings
from retbench.secrets import request_url

RETRYABLE_HTTP = {408, 409, 425, 429, 500, 502, 503, 504}


def estimate_tokens(text: str) -> int:
    """Characters / 4, at least 1 for non-empty text: an estimate for servers that report no usage."""
    return (len(text) + 3) // 4


@dataclass
class Completion:
    """One chat call's outcome. `status`: ok, judge_error or judge_timeout."""

    status: str
    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_estimated: bool = False
    latency_s: float = 0.0
    streamed: bool = False
    model: str | None = None
    error: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)  # each failed attempt: error, status, waited_s


class ChatClient:
    """Calls one OpenAI-compatible server with the judge settings (temperature, seed, max tokens...)."""

    def __init__(self, settings: JudgeSettings, base_url: str | None = None) -> None:
        self.settings = settings
        # a `user:pass@` in the URL is registered as a secret and sent as a Basic header, never in the URL
        url, self._auth = request_url((base_url or settings.base_url or "").rstrip("/"))
        self.base_url = url[: -len("/v1")] if url.endswith("/v1") else url

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **self._auth}
        key = self.settings.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def models(self) -> list[str]:
        """Model ids the server reports (`GET /v1/models`); an unreachable server raises OSError."""
        req = urllib.request.Request(f"{self.base_url}/v1/models", headers=self._headers())
        with urllib.request.urlopen(req, timeout=min(self.settings.timeout, 30.0)) as resp:
            body = json.loads(resp.read().decode("utf-8"))
        return [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)]

    def chat(self, messages: list[dict[str, str]], model: str | None = None) -> Completion:
        """Send one chat request, retrying failed attempts; always returns a Completion."""
        s = self.settings
        body: dict[str, Any] = {
            "model": model or s.model or "",
            "messages": messages,
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
            "stream": s.stream,
            **dict(s.extra),
        }
        if s.seed is not None:
            body["seed"] = s.seed
        if s.stream:
            body["stream_options"] = {"include_usage": True}
        data = json.dumps(body).encode("utf-8")
        attempts: list[dict[str, Any]] = []
        start = time.perf_counter()
        for attempt in range(s.retries + 1):
            status, error, retry = "judge_error", "", False
            try:
                out = self._once(data)
                out.latency_s = time.perf_counter() - start
                out.attempts = attempts
                if not (out.input_tokens or out.output_tokens):
                    out.input_tokens = sum(estimate_tokens(m.get("content", "")) for m in messages)
                    out.output_tokens = estimate_tokens(out.text)
                    out.tokens_estimated = True
                return out
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode("utf-8", "replace") if exc.fp else ""
                error, retry = f"HTTP {exc.code}: {detail}".strip(), exc.code in RETRYABLE_HTTP
            except TimeoutError as exc:
                status, error, retry = "judge_timeout", f"timed out after {s.timeout:g} s ({exc})", True
            except urllib.error.URLError as exc:
                timeout = isinstance(exc.reason, (TimeoutError, socket.timeout))
                status = "judge_timeout" if timeout else "judge_error"
                error, retry = f"{type(exc.reason).__name__}: {exc.reason}", True
            except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
                error, retry = f"{type(exc).__name__}: {exc}", isinstance(exc, OSError)
            waited = s.backoff * 2**attempt if retry and attempt < s.retries else 0.0
            attempts.append({"attempt": attempt + 1, "status": status, "error": error, "waited_s": waited})
            if not retry or attempt == s.retries:
                return Completion(status, error=error, attempts=attempts, latency_s=time.perf_counter() - start)
            time.sleep(waited)
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, data: bytes) -> Completion:
        req = urllib.request.Request(f"{self.base_url}/v1/chat/completions", data=data, headers=self._headers())
        with urllib.request.urlopen(req, timeout=self.settings.timeout) as resp:
            kind = resp.headers.get("Content-Type", "")
            if "text/event-stream" in kind:
                return _read_sse(resp, time.monotonic() + self.settings.timeout)
            body = json.loads(resp.read().decode("utf-8"))
        if "error" in body and "choices" not in body:
            raise ValueError(f"server error: {body['error']}")
        usage = body.get("usage") or {}
        return Completion(
            "ok",
            text=body["choices"][0]["message"].get("content") or "",
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            model=body.get("model"),
        )


def _read_sse(resp: Any, deadline: float) -> Completion:
    """Concatenate the deltas of an SSE answer; comment lines (`:` keep-alives) are skipped.

    The timeout is for the whole answer: keep-alives reset a socket's read timeout, so a server that
    sends them forever would otherwise never time out.
    """
    parts: list[str] = []
    usage: dict[str, Any] = {}
    model = None
    for raw in resp:
        if time.monotonic() > deadline:
            raise TimeoutError("no complete answer before the deadline (the server kept the stream open)")
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        event = json.loads(payload)
        if "error" in event:
            raise ValueError(f"server error: {event['error']}")
        model = event.get("model", model)
        usage = event.get("usage") or usage
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            parts.append(delta.get("content") or "")
    return Completion(
        "ok",
        text="".join(parts),
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        streamed=True,
        model=model,
    )
