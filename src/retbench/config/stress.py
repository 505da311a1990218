"""The stress config: one system on one dataset under load, with an optional seeded fault plan.

A `retbench stress` config is a `retbench run` experiment (`ExperimentModel`) plus a `stress:` block
(`LoadSettings`: concurrency levels or a stream of writes, retries, deadlines); the system may carry
`faults:` (`FaultSpec`), which `retrievers.faults.FaultyRetriever` injects.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from retbench.config.base import Block, NonNegativeInt, PositiveInt, field_error
from retbench.config.common import Dataset, DatasetSpec
from retbench.config.experiment import ExperimentModel, ExperimentSystem
from retbench.config.streaming import StreamSettings

#: the ways a garbage result is wrong; stress's `validate_ranking` must label each one
GARBAGE_KINDS = ("unknown_id", "duplicate_id", "non_finite_score", "wrong_type")
LATENCY_DISTS = ("constant", "uniform", "exponential", "lognormal")
FAULT_ERRORS = ("RuntimeError", "ConnectionError", "ConnectionResetError", "OSError", "TimeoutError", "ValueError")
Rate = Annotated[float, Field(ge=0.0, le=1.0)]


class FaultSpec(Block, frozen=True):
    """What to inject (`retrievers.faults.FaultyRetriever`). Rates are per call and exclusive (one draw picks
    at most one fault)."""

    seed: int = 0
    latency: dict[str, Any] | None = Field(
        None, description="{dist: constant|uniform|exponential|lognormal, ms, low_ms, high_ms, sigma}"
    )
    error_rate: Rate = 0.0
    error_type: Literal[FAULT_ERRORS] = "RuntimeError"  # type: ignore[valid-type]
    error_message: str = "injected fault"
    hang_rate: Rate = 0.0
    hang_s: float = Field(600.0, ge=0.0, description="how long a hang lasts at most")
    empty_rate: Rate = 0.0
    garbage_rate: Rate = 0.0
    garbage_kinds: list[Literal[GARBAGE_KINDS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(GARBAGE_KINDS)
    )
    crash_after: NonNegativeInt | None = Field(None, description="after this many search calls every call fails")
    crash_message: str = "injected crash: backend stopped answering"
    write_fail_at: PositiveInt | None = Field(None, description="the write of document N (1-based) fails")
    write_fail_message: str = "injected write fault: WAL record checksum mismatch"

    @model_validator(mode="after")
    def _one_draw(self) -> FaultSpec:
        if self.error_rate + self.hang_rate + self.empty_rate + self.garbage_rate > 1.0 + 1e-9:
            raise ValueError("fault rates add up to more than 1")
        dist = (self.latency or {}).get("dist", "constant")
        if dist not in LATENCY_DISTS:
            raise field_error(
                "latency.dist", f"unknown latency distribution {dist!r}; valid: {', '.join(LATENCY_DISTS)}"
            )
        return self


class StressSystem(ExperimentSystem):
    """The system of a stress run, optionally with a seeded fault plan."""

    faults: FaultSpec | None = Field(None, description="latency, error_rate, hang_rate, ... (a seeded fault plan)")


FailureOutcome = Literal["error", "timeout", "invalid"]  # data.QueryStatus values that are failures


def _retried() -> list[FailureOutcome]:
    return ["error", "timeout"]


# The most concurrent workers (threads, or coroutines for async adapters) one stress level starts. A level
# is also never given more workers than it has requests: a level of 100,000 with 5 requests runs 5.
MAX_CONCURRENCY = 4096


def _bounded_levels(levels: list[int]) -> list[int]:
    if max(levels) > MAX_CONCURRENCY:
        raise ValueError(
            f"a level of {max(levels)} is above the most concurrent workers retbench starts "
            f"({MAX_CONCURRENCY}); drive more load from several processes"
        )
    return levels


class LoadSettings(Block):
    """How load is applied: the `stress:` block of a stress config."""

    levels: Annotated[list[PositiveInt], AfterValidator(_bounded_levels)] = Field(
        default_factory=lambda: [1, 4, 16],
        min_length=1,
        description=f"concurrent workers per level (at most {MAX_CONCURRENCY}: drive more load from several processes)",
    )
    requests: PositiveInt | None = Field(None, description="requests per level (default: one per query)")
    duration_s: float | None = Field(None, gt=0.0, description="seconds per level instead of a request count")
    warmup: NonNegativeInt = 10
    timeout_s: float | None = Field(10.0, gt=0.0, description="per request (null: no deadline)")
    retries: NonNegativeInt = 0
    backoff_s: float = Field(0.05, ge=0.0)
    backoff_factor: float = Field(2.0, ge=0.0)
    backoff_max_s: float = Field(2.0, ge=0.0)
    retry_on: list[FailureOutcome] = Field(default_factory=_retried, description="failure outcomes that are retried")
    allowed_failure_rate: float = Field(0.0, ge=0.0, le=1.0)
    stop_on_failure: bool = True
    max_abandoned: PositiveInt = 32
    mode: Literal["auto", "sync", "async"] = Field("auto", description="auto: asyncio for adapters declaring async")
    ingest_batch_size: PositiveInt | None = None
    flush_interval_s: float = Field(0.2, gt=0.0)
    streaming: StreamSettings | None = Field(
        None, description="search while a seeded stream of writes runs, instead of the concurrency levels"
    )

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1-based): exponential, capped."""
        return min(self.backoff_s * self.backoff_factor ** (retry - 1), self.backoff_max_s)


def _exactly_one(what: str) -> Any:
    def check(items: list[Any]) -> list[Any]:
        if len(items) != 1:
            raise ValueError(f"stress takes exactly one {what}, got {len(items)}")
        return items

    return AfterValidator(check)


class StressModel(ExperimentModel):
    """One system on one dataset, written as a `retbench run` experiment plus a `stress:` block."""

    datasets: Annotated[list[Dataset], _exactly_one("dataset")] = Field(min_length=1)
    systems: Annotated[list[StressSystem], _exactly_one("system")] = Field(min_length=1)  # type: ignore[assignment]
    stress: LoadSettings = Field(default_factory=LoadSettings)

    @property
    def system(self) -> StressSystem:
        return self.systems[0]

    @property
    def dataset(self) -> DatasetSpec:
        return self.dataset_specs[0]

    @property
    def k(self) -> int:
        """The k of every request (and of the short-result rule): the experiment's `depth`."""
        return self.depth

    def fingerprint(self) -> str:
        """What must match for a journal to be resumed: the validated config but its `output` (the folder may move)."""
        body = self.model_dump(mode="json", exclude={"output"})
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
