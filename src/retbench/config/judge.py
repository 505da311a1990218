"""The `judge:` config block: which OpenAI-compatible chat endpoint judges, and how it is called.

Any server that speaks `/v1/chat/completions` works (vLLM, llama.cpp's server, Ollama, LM Studio,
hosted APIs). The API key is read from the environment variable named by `api_key_env` (the loader
checks it is set before any work starts and registers its value for redaction) and is never
written anywhere (manifests record the variable's name only). `local:` starts a loopback-only
tinyq4 server on a GGUF file instead of naming a URL (see `llm/local.py`). Model files are read
relative to the config's folder, then `$RETBENCH_CACHE`, and must exist when the config is loaded.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from retbench.config.base import Block, ModelFile, NonNegativeFloat, NonNegativeInt, PositiveInt, field_error, validate
from retbench.config.env import check_env
from retbench.config.lines import field_lines, locate
from retbench.config.loader import read_config
from retbench.errors import ConfigError
from retbench.secrets import register, register_url


def _base_url(url: str) -> str:
    """An http(s) URL with a host; the message names the scheme, never the URL (it may hold a password)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError:  # a malformed host or port
        raise ValueError("must be an http:// or https:// URL with a host (malformed)") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"must be an http:// or https:// URL with a host (scheme {parts.scheme!r})")
    if not host:
        raise ValueError("must be an http:// or https:// URL with a host (no host)")
    # `user:pass@` is sent as HTTP Basic auth; registered here, it is masked in every file and stream retbench writes
    register_url(url)
    return url


BaseURL = Annotated[str, AfterValidator(_base_url)]


class LocalServer(Block, frozen=True):
    """A GGUF file served by tinyq4 on 127.0.0.1 for the duration of a command."""

    model_file: ModelFile = Field(description="a GGUF file (relative to the config's folder or $RETBENCH_CACHE)")
    threads: PositiveInt = 1
    start_timeout: float = Field(300.0, ge=1.0, description="seconds to wait for the server to answer")


class JudgeSettings(Block, frozen=True):
    """How to reach and call the judge; every field that changes an answer is part of the cache key."""

    base_url: BaseURL | None = Field(None, description="an OpenAI-compatible server (http://host:port)")
    model: str | None = Field(None, description="the model to ask (default: the first the server lists)")
    api_key_env: str | None = Field(None, description="the environment variable holding the API key")
    temperature: NonNegativeFloat = 0.0
    seed: int | None = 0
    max_tokens: PositiveInt = 64
    timeout: float = Field(300.0, gt=0.0, description="seconds per attempt")
    retries: NonNegativeInt = Field(2, description="extra attempts after a failed one, each recorded")
    backoff: NonNegativeFloat = Field(1.0, description="seconds before the first retry, doubled each time")
    concurrency: PositiveInt = 1
    price_input_per_1k: NonNegativeFloat = 0.0
    price_output_per_1k: NonNegativeFloat = 0.0
    stream: bool = Field(False, description="ask for SSE; a server that streams anyway is read either way")
    model_file: ModelFile | None = Field(None, description="a local model file to fingerprint (sha256)")
    local: LocalServer | None = None
    prompt: str = "relevance_v3"
    check_prompt: str | None = Field("relevance_v4", description="the spot-check's second prompt version")
    extra: dict[str, Any] = Field(default_factory=dict, description="more request-body fields, sent as given")

    @model_validator(mode="after")
    def _reachable(self) -> JudgeSettings:
        if not self.base_url and self.local is None:
            raise field_error("base_url", "give base_url (an OpenAI-compatible server) or local.model_file")
        return self

    @classmethod
    def from_config(
        cls, block: Mapping[str, Any] | None, where: str = "judge", source: str | None = None
    ) -> JudgeSettings:
        """Validate a `judge:` mapping; a wrong field is an error naming `<where>.<field>`."""
        if not isinstance(block, Mapping):
            raise ConfigError("the judge block must be a mapping", path=source, field=where)
        return validate(cls, block, source, prefix=where)

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
        """Everything but secrets: the key's variable name is kept, its value never read here; the base URL
        without a secret-looking query value."""
        out = self.model_dump()
        if self.base_url:
            out["base_url"] = register_url(self.base_url)
        return out

    def with_(self, **changes: Any) -> JudgeSettings:
        return self.model_copy(update=changes)

    def model_path(self) -> Path | None:
        """The local model file, if there is one (served by `local:` or named by `model_file`)."""
        name = self.local.model_file if self.local else self.model_file
        return Path(name) if name else None


class JudgeFile(Block):
    """A file with a `judge:` block (`judge-relevance --judge`): a file of its own, or any config holding one."""

    model_config = ConfigDict(extra="allow")

    judge: JudgeSettings


def load_judge(path: str | Path) -> tuple[JudgeSettings, Any]:
    """(the judge settings, the whole file's data) of a file with a `judge:` block; errors name file:line."""
    source = str(path)
    data, text = read_config(path)
    try:
        if not isinstance(data, Mapping) or "judge" not in data:
            raise ConfigError("no judge: block", path=source, field="judge")
        settings = validate(JudgeFile, data, source).judge
        check_env({"judge": data["judge"]}, source)
    except ConfigError as exc:
        raise locate(exc, source, field_lines(text)) from None
    return settings, data
