"""A small client for OpenAI-compatible chat endpoints (`POST /v1/chat/completions`, `GET /v1/models`).

Standard library only (urllib), so judging adds no dependency. Both answer shapes are read: a JSON
body (`choices[0].message.content`) and server-sent events (`data: {...}` lines with
`choices[0].delta.content`, ended by `data: [DONE]`), whatever was asked for, because some servers
always stream. `content` may be a string or a list of content parts (OpenAI's format: the `text` of
each text part, joined). Failed attempts are retried with exponential backoff (`backoff * 2**i`
seconds) and every failed attempt is recorded; what is left after the last retry is a status
(`judge_error` or `judge_timeout`), never an exception and never a number.

What counts as a failed attempt, beside refused connections and HTTP errors:
- the deadline: `timeout` bounds the whole attempt (connect, headers and body together). A server
  that trickles its answer a byte at a time, or sends keep-alives forever, resets a socket's read
  timeout on every byte; a timer shuts the socket at the deadline instead, so no server holds a
  call longer than `timeout` (plus the time to notice, well under a second);
- a cut answer: a stream that ends before `data: [DONE]` and before any choice's `finish_reason`, or
  a JSON body shorter than its `Content-Length`. The text so far is not an answer: it is neither
  scored nor cached, and the attempt is retried like a dropped connection;
- a body that is not the protocol's: HTML (a web page at `base_url`), JSON without `choices`, a
  content that is neither text nor text parts, more than `MAX_BODY` bytes.

An over-long reply: a reply longer than `MAX_REPLY_CHARS` characters is status `judge_overlong` (its own
verdict status: a verdict is a few hundred characters and an answer is bounded by `max_tokens`, so megabytes
are a runaway model or a broken server). It is not parsed (the last JSON object of a cut reply is not the
model's final answer), not cached, and not kept whole: the call log keeps its first `REPLY_PREFIX_CHARS`
characters with `reply_truncated: true`, its full length in characters and the sha256 of its UTF-8 bytes.

Token counts come from the server's `usage` when it reports a plausible one; otherwise they are
estimated as characters / 4 (the usual rule of thumb for English) and marked `tokens_estimated`.
Plausible: finite whole numbers from 0 to the bytes sent (input) or received plus `max_tokens`
(output), plus `USAGE_SLACK` tokens of chat-template overhead: a byte-level BPE token covers at
least one byte of text, so a larger count is a server bug (NaN, Infinity, negative or absurd
counts once priced a single call at astronomical cost). An implausible `usage` is set aside with a
note (`usage_note`) and the counts are estimated instead.

Token probabilities: when the server returns `logprobs` (OpenAI's `logprobs: true, top_logprobs: N`
in the request, e.g. through the judge's `extra`), each answer token's log-probability and its top
alternatives are kept in `Completion.logprobs`; non-finite or positive log-probabilities are dropped.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from retbench.jsontypes import JSONObject, JSONValue
from retbench.llm.settings import JudgeSettings
from retbench.llm.transport import ERROR_CHARS, CallFailed, fetch
from retbench.secrets import clip, request_url

USAGE_SLACK = 4096  # tokens a chat template or a server's own system text may add to a count
MODELS_TIMEOUT = 30.0  # seconds at most for `GET /v1/models`, whatever the call timeout
MAX_REPLY_CHARS = 100_000  # characters of a usable reply: 25,000 tokens at 4 characters a token
REPLY_PREFIX_CHARS = 2_000  # characters of an over-long reply kept in the call log


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
    attempts: list[JSONObject] = field(default_factory=list)  # each failed attempt: error, status, waited_s
    usage: Mapping[str, JSONValue] = field(default_factory=dict)  # the server's `usage` as it came
    usage_note: str | None = None  # why the server's usage was set aside for an estimate
    logprobs: list[JSONObject] | None = None  # per answer token: token, logprob, top [[token, logprob], ...]
    reply_cut: JSONObject | None = None  # an over-long reply: reply_truncated, reply_chars, reply_sha256

    def cap_reply(self) -> None:
        """Make an over-long reply status `judge_overlong`, keeping a prefix, its length and its sha256 (module
        docstring)."""
        if len(self.text) <= MAX_REPLY_CHARS:
            return
        digest = hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()
        self.reply_cut = {"reply_truncated": True, "reply_chars": len(self.text), "reply_sha256": digest}
        self.status = "judge_overlong"
        self.error = (
            f"reply of {len(self.text):,} characters is longer than the {MAX_REPLY_CHARS:,} a reply may have; "
            f"not parsed, the first {REPLY_PREFIX_CHARS:,} kept"
        )
        self.text = self.text[:REPLY_PREFIX_CHARS]
        self.logprobs = None


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
        """Model ids the server reports (`GET /v1/models`); CallFailed says why there are none to read."""
        return [str(m.get("id")) for m in self.model_entries()]

    def model_entries(self) -> list[dict[str, Any]]:
        """The model objects of `GET /v1/models` as the server sent them (id, and whatever else it reports)."""
        req = urllib.request.Request(f"{self.base_url}/v1/models", headers=self._headers())
        kind, body = fetch(req, min(self.settings.timeout, MODELS_TIMEOUT))
        data = _json_body(body, kind, "GET /v1/models")
        if not isinstance(data.get("data"), list):
            raise CallFailed("GET /v1/models answered JSON without a `data` list of models")
        return [m for m in data["data"] if isinstance(m, dict)]

    def chat(self, messages: list[dict[str, str]], model: str | None = None) -> Completion:
        """Send one chat request, retrying failed attempts; always returns a Completion."""
        s = self.settings
        body: JSONObject = {
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
        attempts: list[JSONObject] = []
        start = time.perf_counter()
        for attempt in range(s.retries + 1):
            try:
                out = self._once(data)
            except CallFailed as exc:
                status, error, retry = ("judge_timeout" if exc.timeout else "judge_error"), str(exc), exc.retry
            else:
                out.latency_s = time.perf_counter() - start
                out.attempts = attempts
                self._count_tokens(out, messages, len(data))
                out.cap_reply()
                return out
            waited = s.backoff * 2**attempt if retry and attempt < s.retries else 0.0
            attempts.append({"attempt": attempt + 1, "status": status, "error": error, "waited_s": waited})
            if not retry or attempt == s.retries:
                return Completion(status, error=error, attempts=attempts, latency_s=time.perf_counter() - start)
            time.sleep(waited)
        raise AssertionError("unreachable")  # pragma: no cover

    def _count_tokens(self, out: Completion, messages: list[dict[str, str]], sent_bytes: int) -> None:
        """The server's usage when it is plausible (module docstring), else the characters / 4 estimate."""
        extra_max = [v for k, v in self.settings.extra.items() if k in ("max_tokens", "max_completion_tokens")]
        max_out = max([self.settings.max_tokens, *(v for v in extra_max if isinstance(v, int))])
        bounds = {
            "prompt_tokens": sent_bytes + USAGE_SLACK,
            "completion_tokens": len(out.text.encode("utf-8")) + max_out + USAGE_SLACK,
        }
        counts, notes = {}, []
        for name, bound in bounds.items():
            value = out.usage.get(name)
            if value is None:
                counts[name] = 0
            elif _whole(value) and 0 <= value <= bound:
                counts[name] = int(value)
            else:
                notes.append(f"{name} {value!r} is not a plausible token count (expected a whole number 0..{bound})")
        if notes:
            out.usage_note = "usage set aside, tokens estimated: " + "; ".join(notes)
        if notes or not (counts["prompt_tokens"] or counts["completion_tokens"]):
            out.input_tokens = sum(estimate_tokens(str(m.get("content", ""))) for m in messages)
            out.output_tokens = estimate_tokens(out.text)
            out.tokens_estimated = True
        else:
            out.input_tokens, out.output_tokens = counts["prompt_tokens"], counts["completion_tokens"]

    def _once(self, data: bytes) -> Completion:
        req = urllib.request.Request(f"{self.base_url}/v1/chat/completions", data=data, headers=self._headers())
        kind, body = fetch(req, self.settings.timeout, stop_at_done=True)
        if "text/event-stream" in kind or body.lstrip().startswith(b"data:"):
            return _read_sse(body)
        obj = _json_body(body, kind, "POST /v1/chat/completions")
        if "error" in obj and "choices" not in obj:
            raise CallFailed(f"server error: {clip(str(obj['error']), ERROR_CHARS)}")
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise CallFailed("the answer has no choices (expected choices[0].message.content)")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise CallFailed("choices[0] has no message object")
        return Completion(
            "ok",
            text=content_text(message.get("content"), "choices[0].message.content"),
            usage=_mapping(obj.get("usage")),
            model=_model(obj.get("model")),
            logprobs=token_logprobs(choices[0].get("logprobs")),
        )


_SHA256 = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


def reported_fingerprint(entry: Mapping[str, Any]) -> str | None:
    """The sha256 of the model file a server reports in its `/v1/models` entry, when it reports one: a field
    `sha256` or `digest` (Ollama's style, `sha256:<hex>`) holding 64 hex digits. None otherwise (most servers)."""
    for name in ("sha256", "digest"):
        value = entry.get(name)
        m = _SHA256.fullmatch(value.strip().lower()) if isinstance(value, str) else None
        if m:
            return m[1]
    return None


def _json_body(body: bytes, kind: str, what: str) -> dict[str, Any]:
    """The body as a JSON object, or CallFailed naming what came instead (an HTML page, a bare value)."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except ValueError:
        shown = clip(body, 80).replace("\n", " ").strip()
        raise CallFailed(
            f"{what} answered {kind or 'a body without a Content-Type'}, not JSON ({shown!r}); "
            "is base_url an OpenAI-compatible server?"
        ) from None
    if not isinstance(obj, dict):
        raise CallFailed(f"{what} answered JSON that is not an object ({type(obj).__name__})")
    return obj


def content_text(content: object, where: str) -> str:
    """A message's text: a string, or OpenAI's content parts (the `text` of each text part, joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for i, part in enumerate(content):
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif not (isinstance(part, dict) and part.get("type") not in (None, "text")):
                raise CallFailed(f"{where}[{i}] is not a text part: {clip(str(part), 80)}")
        return "".join(out)
    raise CallFailed(f"{where} is a {type(content).__name__}, not text or a list of text parts")


def _whole(value: object) -> TypeGuard[int | float]:
    """A finite whole number (1e3 and 1000 both; NaN, Infinity, 2.5, True and "12" not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or (math.isfinite(value) and value == int(value))


def _mapping(value: object) -> JSONObject:
    return dict(value) if isinstance(value, dict) else {}


def _model(value: object) -> str | None:
    return value if isinstance(value, str) else None


def token_logprobs(block: object) -> list[JSONObject] | None:
    """OpenAI's `logprobs.content` -> [{token, logprob, top: [[token, logprob], ...]}]; None when absent.

    Entries whose log-probability is not a finite number <= 0 are left out (they are no probability).
    """
    items = block.get("content") if isinstance(block, dict) else None
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("token"), str) or not _logprob(item.get("logprob")):
            continue
        top: list[Any] = item["top_logprobs"] if isinstance(item.get("top_logprobs"), list) else []
        alts = [
            [t["token"], float(t["logprob"])]
            for t in top
            if isinstance(t, dict) and isinstance(t.get("token"), str) and _logprob(t.get("logprob"))
        ]
        out.append({"token": item["token"], "logprob": float(item["logprob"]), "top": alts})
    return out


def _logprob(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value <= 0


def _read_sse(body: bytes) -> Completion:
    """The deltas of an SSE answer, concatenated; comment lines (`:` keep-alives) are skipped.

    Complete only when `data: [DONE]` came, or a choice's `finish_reason` did (some servers close the
    stream without [DONE]); otherwise the stream was cut and the text so far is not an answer.
    """
    parts: list[str] = []
    usage: JSONObject = {}
    logprobs: list[JSONObject] | None = None
    model = None
    done = finished = False
    for raw in body.splitlines():
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            done = True
            break
        try:
            event = json.loads(payload)
        except ValueError:
            raise CallFailed(f"an event of the stream is not JSON: {clip(payload, 80)!r}") from None
        if not isinstance(event, dict):
            raise CallFailed(f"an event of the stream is not a JSON object: {clip(payload, 80)!r}")
        if "error" in event:
            raise CallFailed(f"server error: {clip(str(event['error']), ERROR_CHARS)}")
        model = _model(event.get("model")) or model
        usage = _mapping(event.get("usage")) or usage
        choices = event.get("choices") or []
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta, dict):
                parts.append(content_text(delta.get("content"), "choices[0].delta.content"))
            more = token_logprobs(choice.get("logprobs"))
            if more is not None:
                logprobs = [*(logprobs or []), *more]
            finished = finished or bool(choice.get("finish_reason"))
    if not (done or finished):
        raise CallFailed(
            "the stream ended before data: [DONE] and before a finish_reason: the answer is incomplete",
            retry=True,
        )
    return Completion("ok", text="".join(parts), usage=usage, streamed=True, model=model, logprobs=logprobs)


def grade_probabilities(logprobs: Sequence[Mapping[str, Any]] | None, grades: Sequence[int]) -> dict[str, float] | None:
    """{grade: probability} read at the answer's grade token, renormalized over the grades; None if unseen.

    The grade token is the last answer token that is a grade by itself (`{"grade": 2}`: the `2`);
    its top alternatives give the probability of every grade (log-probabilities exponentiated, then
    divided by their sum over the grades present, so they add up to 1). None when the server sent no
    log-probabilities or no token of the answer is a grade.
    """
    if not logprobs:
        return None
    names = {str(g) for g in grades}
    for item in reversed(logprobs):
        if str(item.get("token", "")).strip() not in names:
            continue
        alternatives = {str(t): float(lp) for t, lp in item.get("top", [])}
        alternatives.setdefault(str(item["token"]), float(item["logprob"]))  # the chosen token is often listed too
        found: dict[str, float] = {}
        for token, lp in alternatives.items():  # " 2" and "2" are the same grade
            if token.strip() in names:
                found[token.strip()] = found.get(token.strip(), 0.0) + math.exp(lp)
        total = sum(found.values())
        if total <= 0:
            return None
        return {g: found.get(g, 0.0) / total for g in sorted(names, key=int)}
    return None
