"""The judge: a prompt, a pinned model, a cache and a call log around the chat client.

`Judge.judge(items)` fills the prompt for each item, serves cached answers without a call, calls the
server for the rest (`concurrency` at a time), parses and validates each answer, and returns one
`Verdict` per item: a value, or a status (`judge_error`, `judge_timeout`, `unparseable`). Nothing is
ever turned into a number it is not: only a complete answer is parsed or cached (a cut stream is a
failed call, llm/client.py), so a failed call is asked again by the next run. A `Judge` that
generates answers rather than verdicts names its failures after its stage (`failure="generation"`:
`generation_error`, `generation_timeout`). `Judge.estimate(items)` is the dry run: calls that would
be made, tokens (input estimated from the prompt, output bounded by max_tokens) and their cost.
A verdict whose prompt fields speak to the judge (llm/injection.py) carries `flags`, kept as judged and
counted (`JudgeStats.flagged`); the cache is keyed on the model's identity (llm/store.py: `keyed_on`).

Graded relevance from token probabilities: when the server returns log-probabilities (ask with
`extra: {logprobs: true, top_logprobs: 5}`) and the judge grades (`grades`, 0-3 for `parse_grade`),
each verdict also carries the probability of every grade at the grade token (renormalized over the
grades, `client.grade_probabilities`) and the expected grade, sum of grade x probability: a
continuous score where a small judge's argmax collapses to one or two grades.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.errors import BackendError
from retbench.jsontypes import JSONObject
from retbench.llm.client import (
    CallFailed,
    ChatClient,
    Completion,
    estimate_tokens,
    grade_probabilities,
    reported_fingerprint,
)
from retbench.llm.injection import flags as injection_flags
from retbench.llm.local import cache_root, local_server
from retbench.llm.prompts import Prompt, load_prompt
from retbench.llm.settings import JudgeSettings
from retbench.llm.store import CallLog, JudgeIdentity, VerdictCache, fingerprint_file, sha256_json
from retbench.llm.verdicts import parse_grade

Parser = Callable[[str], tuple[Any, str]]


@dataclass
class Verdict:
    """One judged item: `value` is set only when `status == "ok"`."""

    key: Any
    status: str
    value: Any = None
    raw: str = ""
    cached: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    probabilities: dict[str, float] | None = None  # grade -> probability at the grade token, when logprobs came
    expected: float | None = None  # sum of grade x probability
    flags: list[str] = field(default_factory=list)  # why the judged text reads as instructions to the judge

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class JudgeStats:
    """What a command cost: calls made (cache hits are not calls), tokens, and verdicts by status."""

    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_estimated: bool = False
    retries: int = 0
    seconds: float = 0.0
    statuses: Counter = field(default_factory=Counter)
    flagged: int = 0  # verdicts whose judged text carries instructions to the judge (llm/injection.py)

    def cost(self, settings: JudgeSettings) -> float:
        return (
            self.input_tokens / 1000 * settings.price_input_per_1k
            + self.output_tokens / 1000 * settings.price_output_per_1k
        )

    def to_dict(self, settings: JudgeSettings) -> JSONObject:
        judged = self.statuses.get("ok", 0)
        return {
            "calls": self.calls,
            "cached": self.cached,
            "judged": judged,
            "total": sum(self.statuses.values()),
            "statuses": dict(self.statuses),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tokens_estimated": self.tokens_estimated,
            "retries": self.retries,
            "cost": round(self.cost(settings), 6),
            "call_seconds": round(self.seconds, 3),
            "flagged": self.flagged,
        }


class Judge:
    """A pinned judge: settings + prompt + server, with its identity, cache and call log."""

    def __init__(
        self,
        settings: JudgeSettings,
        prompt: Prompt | str | None = None,
        *,
        base_url: str | None = None,
        log_path: Path | None = None,
        cache_dir: Path | None = None,
        parse: Parser = parse_grade,
        failure: str = "judge",
        grades: Sequence[int] | None = None,
    ) -> None:
        self.settings = settings
        self.prompt = load_prompt(prompt or settings.prompt) if not isinstance(prompt, Prompt) else prompt
        self.client = ChatClient(settings, base_url)
        self.cache_dir = cache_dir or cache_root()
        self.log = CallLog(log_path)
        self.parse = parse
        self.failure = failure  # failed calls are `<failure>_error` / `<failure>_timeout`
        self.grades = tuple(grades) if grades is not None else ((0, 1, 2, 3) if parse is parse_grade else None)
        self.stats = JudgeStats()
        self._lock = threading.Lock()  # stats are shared by the concurrent calls
        self._identity: JudgeIdentity | None = None
        self._cache: VerdictCache | None = None

    @property
    def identity(self) -> JudgeIdentity:
        """Asks the server which model it serves (once) and fingerprints a local model file."""
        if self._identity is None:
            try:
                entries = self.client.model_entries()
            except CallFailed as exc:
                raise BackendError(f"judge server {self.client.base_url}: {exc}") from None
            served = [str(m.get("id")) for m in entries]
            model = self.settings.model or (served[0] if served else "")
            if self.settings.model and served and self.settings.model not in served:
                raise BackendError(f"judge server serves {served}, not the configured model {self.settings.model!r}")
            path = self.settings.model_path()
            hashed = fingerprint_file(path, self.cache_dir) if path else None
            reported = next((reported_fingerprint(m) for m in entries if str(m.get("id")) == model), None)
            self._identity = JudgeIdentity(
                model=model,
                model_file=str(path) if path else None,
                model_sha256=hashed or reported,
                prompt=self.prompt.describe(),
                settings=self.settings.answer_fields(),
                server=self.client.base_url,
                sha256_from="model file" if hashed else "reported by the server" if reported else None,
            )
        return self._identity

    @property
    def cache(self) -> VerdictCache:
        if self._cache is None:
            self._cache = VerdictCache.open(self.cache_dir, self.identity)
        return self._cache

    def _messages(self, fields: Mapping[str, str]) -> list[dict[str, str]]:
        return self.prompt.messages(**fields)

    def estimate(self, items: Sequence[tuple[Any, Mapping[str, str]]]) -> JSONObject:
        """The dry run: calls that would be made (cache hits excluded), estimated tokens and cost."""
        calls = in_tok = 0
        for _, fields in items:
            messages = self._messages(fields)
            if self.cache.get(sha256_json(messages)) is None:
                calls += 1
                in_tok += sum(estimate_tokens(m["content"]) for m in messages)
        out_tok = calls * self.settings.max_tokens
        s = self.settings
        cost = in_tok / 1000 * s.price_input_per_1k + out_tok / 1000 * s.price_output_per_1k
        return {
            "items": len(items),
            "calls": calls,
            "cached": len(items) - calls,
            "input_tokens": in_tok,
            "output_tokens_max": out_tok,
            "cost_max": round(cost, 6),
        }

    def judge(self, items: Sequence[tuple[Any, Mapping[str, str]]]) -> list[Verdict]:
        """One Verdict per (key, prompt fields) item, in order."""
        identity = self.identity.to_dict()
        cache = self.cache
        if self.settings.concurrency > 1 and len(items) > 1:
            with ThreadPoolExecutor(self.settings.concurrency) as pool:
                return list(pool.map(lambda it: self._one(it[0], it[1], identity, cache), items))
        return [self._one(key, fields, identity, cache) for key, fields in items]

    def _one(self, key: Any, fields: Mapping[str, str], identity: JSONObject, cache: VerdictCache) -> Verdict:
        messages = self._messages(fields)
        digest = sha256_json(messages)
        flagged = injection_flags(fields)
        hit = cache.get(digest)
        if hit is not None:
            value, status = self.parse(hit["raw"])
            verdict = Verdict(key, status, value, hit["raw"], True, flags=flagged)
            verdict = self._graded(verdict, hit.get("logprobs"))
            with self._lock:
                self.stats.cached += 1
                self.stats.statuses[status] += 1
                self.stats.flagged += bool(flagged)
            self._log(verdict, messages, digest, identity, None)
            return verdict
        done = self.client.chat(messages, self.identity.model or None)
        failed = done.status.replace("judge_", f"{self.failure}_", 1)
        value, status = self.parse(done.text) if done.status == "ok" else (None, failed)
        verdict = Verdict(key, status, value, done.text, False, done.input_tokens, done.output_tokens, flags=flagged)
        verdict = self._graded(verdict, done.logprobs)
        with self._lock:
            st = self.stats
            st.flagged += bool(flagged)
            st.calls += 1
            st.retries += sum(1 for a in done.attempts if a.get("waited_s"))
            st.input_tokens += done.input_tokens
            st.output_tokens += done.output_tokens
            st.tokens_estimated = st.tokens_estimated or done.tokens_estimated
            st.seconds += done.latency_s
            st.statuses[status] += 1
        if done.status == "ok":
            cache.put(
                {
                    "input_sha256": digest,
                    "raw": done.text,
                    "input_tokens": done.input_tokens,
                    "output_tokens": done.output_tokens,
                    "at": time.time(),
                    **({"logprobs": done.logprobs} if done.logprobs else {}),
                }
            )
        self._log(verdict, messages, digest, identity, done)
        return verdict

    def _graded(self, verdict: Verdict, logprobs: Sequence[Mapping[str, Any]] | None) -> Verdict:
        """The grade probabilities and expected grade of an ok verdict whose answer came with logprobs."""
        if verdict.ok and self.grades and logprobs:
            probs = grade_probabilities(logprobs, self.grades)
            if probs is not None:
                verdict.probabilities = {g: round(p, 6) for g, p in probs.items()}
                verdict.expected = round(sum(int(g) * p for g, p in probs.items()), 6)
        return verdict

    def _log(
        self, v: Verdict, messages: list[dict[str, str]], digest: str, identity: JSONObject, done: Completion | None
    ) -> None:
        self.log.write(
            {
                "key": v.key,
                "judge": identity["key"],
                "model": identity["model"],
                "prompt": self.prompt.id,
                "input_sha256": digest,
                "messages": messages,
                "raw": v.raw,
                "verdict": v.value,
                "status": v.status,
                "cached": v.cached,
                "input_tokens": v.input_tokens,
                "output_tokens": v.output_tokens,
                "tokens_estimated": bool(done and done.tokens_estimated),
                "cost": round(
                    v.input_tokens / 1000 * self.settings.price_input_per_1k
                    + v.output_tokens / 1000 * self.settings.price_output_per_1k,
                    8,
                ),
                "latency_s": round(done.latency_s, 4) if done else 0.0,
                "streamed": bool(done and done.streamed),
                "attempts": done.attempts if done else [],
                "error": done.error if done else None,
                **({"usage_note": done.usage_note} if done and done.usage_note else {}),
                **(done.reply_cut if done and done.reply_cut else {}),
                **({"probabilities": v.probabilities, "expected": v.expected} if v.probabilities else {}),
                **({"flags": v.flags} if v.flags else {}),
            }
        )

    def manifest(self) -> JSONObject:
        """The judge block for a manifest: identity, settings (no secrets) and this command's stats."""
        return {
            "identity": self.identity.to_dict(),
            "settings": self.settings.to_manifest(),
            "stats": self.stats.to_dict(self.settings),
        }


@contextmanager
def open_base_url(settings: JudgeSettings, log: Path | None = None) -> Iterator[str]:
    """The server to call: `base_url` as given, or a loopback tinyq4 started for the `local:` model."""
    if settings.local is None:
        yield str(settings.base_url)
        return
    with local_server(settings.local.model_file, settings.local.threads, settings.local.start_timeout, log) as url:
        yield url
