"""The `judge:` config block: which OpenAI-compatible chat endpoint judges, and how it is called.

Any server that speaks `/v1/chat/completions` works (vLLM, llama.cpp's server, Ollama, LM Studio,
hosted APIs). The API key is read from the environment variable named by `api_key_env` at call time
and is never written anywhere (manifests record the variable's name only). `local:` starts a
loopback-only tinyq4 server on a GGUF file instead of naming a URL (see `llm/local.py`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from retbench.errors import ConfigError
from retbench.secrets import register, register_url


@dataclass(frozen=True)
class LocalServer:
    """A GGUF file served by tinyq4 on 127.0.0.1 for the duration of a command."""

    model_file: str
    threads: int = 1
    start_timeout: float = 300.0


@dataclass(frozen=True)
class JudgeSettings:
    """How to reach and call the judge; every field that changes an answer is part of the cache key."""

    base_url: str | None = None
    model: str | None = None  # None: the first model the server lists
    api_key_env: str | None = None
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int = 64
    timeout: float = 300.0  # seconds per attempt
    retries: int = 2  # extra attempts after a failed one, each recorded
    backoff: float = 1.0  # seconds before the first retry, doubled each time
    concurrency: int = 1
    price_input_per_1k: float = 0.0
    price_output_per_1k: float = 0.0
    stream: bool = False  # ask for SSE; a server that streams anyway is read either way
    model_file: str | None = None  # a local model file to fingerprint (sha256) for the identity
    local: LocalServer | None = None
    prompt: str = "relevance_v1"
    check_prompt: str | None = "relevance_v2"  # the spot-check's second prompt version
    extra: Mapping[str, Any] = field(default_factory=dict)  # more request-body fields, sent as given

    @classmethod
    def from_config(cls, block: Mapping[str, Any] | None, where: str = "judge") -> JudgeSettings:
        """Validate a `judge:` mapping; a wrong field is an error naming `judge.<field>`."""
        if not isinstance(block, Mapping):
            raise ConfigError("the judge block must be a mapping", field=where)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(block) - known)
        if unknown:
            raise ConfigError(
                f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
                field=f"{where}.{unknown[0]}",
            )
        values = dict(block)
        for name, kind in (
            ("temperature", float),
            ("timeout", float),
            ("backoff", float),
            ("price_input_per_1k", float),
            ("price_output_per_1k", float),
        ):
            if name in values:
                values[name] = _number(values[name], kind, f"{where}.{name}", minimum=0.0)
        for name in ("max_tokens", "concurrency"):
            if name in values:
                values[name] = _number(values[name], int, f"{where}.{name}", minimum=1)
        if "retries" in values:
            values["retries"] = _number(values["retries"], int, f"{where}.retries", minimum=0)
        if values.get("seed") is not None:
            values["seed"] = _number(values["seed"], int, f"{where}.seed")
        if "local" in values and values["local"] is not None:
            local = values["local"]
            if not isinstance(local, Mapping) or "model_file" not in local:
                raise ConfigError("local needs model_file (a GGUF file)", field=f"{where}.local")
            bad = sorted(set(local) - {"model_file", "threads", "start_timeout"})
            if bad:
                raise ConfigError(f"unknown field {bad[0]}", field=f"{where}.local.{bad[0]}")
            values["local"] = LocalServer(
                str(local["model_file"]),
                _number(local.get("threads", 1), int, f"{where}.local.threads", minimum=1),
                _number(local.get("start_timeout", 300.0), float, f"{where}.local.start_timeout", minimum=1.0),
            )
        if "timeout" in values and not 0 < values["timeout"] < float("inf"):
            raise ConfigError(f"must be a number of seconds > 0, got {block['timeout']!r}", field=f"{where}.timeout")
        if values.get("base_url"):
            _check_url(values["base_url"], f"{where}.base_url")
        if not values.get("base_url") and values.get("local") is None:
            raise ConfigError(
                "give base_url (an OpenAI-compatible server) or local.model_file", field=f"{where}.base_url"
            )
        if values.get("extra") is not None and not isinstance(values["extra"], Mapping):
            raise ConfigError("extra must be a mapping of request fields", field=f"{where}.extra")
        return cls(**values)

    def api_key(self) -> str | None:
        """The key, read now from the environment (never stored)."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ConfigError(f"environment variable {self.api_key_env} is not set", field="judge.api_key_env")
        register(key)  # masked in every file and stream retbench writes, like every other secret
        return key

    def answer_fields(self) -> dict[str, Any]:
        """The settings that change an answer (part of the cache key)."""
        return {
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "extra": dict(self.extra),
        }

    def to_manifest(self) -> dict[str, Any]:
        """Everything but secrets: the key's variable name is kept, its value never read here."""
        out = asdict(self)
        out["local"] = asdict(self.local) if self.local else None
        out["extra"] = dict(self.extra)
        if self.base_url:
            out["base_url"] = register_url(self.base_url)  # no `user:pass@`, no secret query value
        return out

    def with_(self, **changes: Any) -> JudgeSettings:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return JudgeSettings(**values)

    def model_path(self) -> Path | None:
        """The local model file, if there is one (served by `local:` or named by `model_file`)."""
        name = self.local.model_file if self.local else self.model_file
        return Path(name) if name else None


def _check_url(url: Any, where: str) -> None:
    """An http(s) URL with a host: the client speaks HTTP, and any other scheme (file:, ftp:) would read elsewhere."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        host = parts.hostname if parts else None
    except ValueError:  # a malformed host or port
        parts = host = None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        got = f"scheme {parts.scheme!r}" if parts and parts.scheme not in ("http", "https") else "no host"
        raise ConfigError(f"must be an http:// or https:// URL with a host ({got})", field=where)


def _number(value: Any, kind: type, where: str, minimum: float | None = None) -> Any:
    if isinstance(value, bool):
        raise ConfigError(f"expected a number, got {value!r}", field=where)
    try:
        out = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"expected a number, got {value!r}", field=where) from None
    if kind is int and out != value:
        raise ConfigError(f"expected an integer, got {value!r}", field=where)
    if minimum is not None and out < minimum:
        raise ConfigError(f"must be >= {minimum:g}, got {value!r}", field=where)
    return out
