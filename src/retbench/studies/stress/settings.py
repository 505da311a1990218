"""How load is applied: the `stress:` block of a stress config, checked field by field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retbench.config import check_types, known_keys
from retbench.errors import ConfigError
from retbench.studies.stress.validate import FAILURE_OUTCOMES

# The most concurrent workers (threads, or coroutines for async adapters) one level starts. A level
# is also never given more workers than it has requests: a level of 100,000 with 5 requests runs 5.
MAX_CONCURRENCY = 4096


# -- settings ---------------------------------------------------------------------------------------
@dataclass
class LoadSettings:
    """How load is applied; the `stress:` block of a stress config."""

    levels: list[int] = field(default_factory=lambda: [1, 4, 16])
    #: requests per level (default: one per query); ignored when duration_s is set
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 10
    timeout_s: float | None = 10.0
    retries: int = 0
    backoff_s: float = 0.05
    backoff_factor: float = 2.0
    backoff_max_s: float = 2.0
    retry_on: list[str] = field(default_factory=lambda: ["error", "timeout"])
    allowed_failure_rate: float = 0.0
    stop_on_failure: bool = True
    max_abandoned: int = 32
    #: "auto" uses asyncio for adapters declaring "async", threads otherwise
    mode: str = "auto"
    ingest_batch_size: int | None = None
    flush_interval_s: float = 0.2

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], where: str = "") -> LoadSettings:
        known_keys(cfg, set(cls.__dataclass_fields__), where or None, "stress")
        check_types(cls, cfg, where or None, "stress")
        s = cls(**dict(cfg))
        s.check(where)
        return s

    def check(self, where: str = "") -> None:
        def bad(name: str, msg: str) -> ConfigError:
            return ConfigError(msg, path=where or None, field=f"stress.{name}")

        if not self.levels or any(not isinstance(c, int) or c < 1 for c in self.levels):
            raise bad("levels", f"must be a list of positive integers, got {self.levels!r}")
        if max(self.levels) > MAX_CONCURRENCY:
            raise bad(
                "levels",
                f"a level of {max(self.levels)} is above the most concurrent workers retbench starts "
                f"({MAX_CONCURRENCY}); drive more load from several processes",
            )
        if self.requests is not None and self.requests < 1:
            raise bad("requests", "must be at least 1")
        if self.duration_s is not None and self.duration_s <= 0:
            raise bad("duration_s", "must be positive")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise bad("timeout_s", "must be positive (or null for no deadline)")
        if self.retries < 0 or self.warmup < 0:
            raise bad("retries" if self.retries < 0 else "warmup", "must not be negative")
        if not 0.0 <= self.allowed_failure_rate <= 1.0:
            raise bad("allowed_failure_rate", "must be between 0 and 1")
        if self.mode not in ("auto", "sync", "async"):
            raise bad("mode", "must be auto, sync or async")
        unknown = [r for r in self.retry_on if r not in FAILURE_OUTCOMES]
        if unknown:
            raise bad("retry_on", f"unknown outcome {unknown[0]!r}; valid: {', '.join(FAILURE_OUTCOMES)}")
        if self.max_abandoned < 1:
            raise bad("max_abandoned", "must be at least 1")

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1-based): exponential, capped."""
        return min(self.backoff_s * self.backoff_factor ** (retry - 1), self.backoff_max_s)
