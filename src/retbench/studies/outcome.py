"""What a study's cells came to: each cell's `Outcome` (its typed result, tables in memory, failures) and the
study's `StudyOutcome` (its config, its `StudyResult`, the outcomes in run order, what its LLM stages got back),
and the exit they decide (`StudyOutcome.exit_code`, `raise_if_failed`): the same for `retbench run` and a Python
caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from retbench.errors import BackendError, ConfigError
from retbench.results.model import StudyResult, SystemResult, SystemTables


@dataclass
class Outcome:
    """What happened to one cell: the shape every study returns and the exit-3 decision reads.

    `result` is set when the cell computed (not when it was skipped as finished, nor when the
    system failed as a whole); `config_error` marks a whole-system failure that is the config's
    (a factory that returns the wrong type), which makes the study exit 2 rather than 3.
    """

    name: str
    skipped: bool = False
    failed_queries: int = 0
    index_error: str | None = None
    first_error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    system: SystemResult = field(default_factory=lambda: SystemResult(""))
    manifest: dict[str, object] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)  # study-specific labels (e.g. chunker, system)
    result: SystemTables | None = None
    config_error: bool = False

    def __post_init__(self) -> None:
        if not self.system.name:
            self.system.name = self.name

    @property
    def failed(self) -> bool:
        return bool(self.failed_queries or self.index_error)


ConfigT = TypeVar("ConfigT")


@dataclass
class StudyOutcome(Generic[ConfigT]):
    """Every cell of a study: its config, the typed results (what metrics.json and manifest.json hold, with
    the tables in memory) and the outcomes in run order."""

    config: ConfigT
    systems: list[Outcome]
    result: StudyResult
    reports: list[str] = field(default_factory=list)  # report files written beside the results
    #: one line per (system, LLM stage) that got no usable answer back: every call failed, or every reply was
    #: unparseable (`studies.llm_calls.failed_llm_stages`); its metrics would read as a system that answers
    #: nothing right, so the study exits 3
    llm_failures: list[str] = field(default_factory=list)
    #: one line per (system, LLM stage) where only some calls gave no verdict: the study stands, the line says how many
    llm_notes: list[str] = field(default_factory=list)

    @property
    def backend_failed(self) -> bool:
        return any(s.failed for s in self.systems)

    @property
    def exit_code(self) -> int:
        """What `retbench run` exits with: 0 ok, 2 a system failed for its config, 3 a backend or every LLM call
        of a stage failed (see `raise_if_failed`)."""
        bad = [s for s in self.systems if s.failed]
        if any(s.config_error for s in bad):
            return 2
        return 3 if bad or self.llm_failures else 0


def raise_if_backend_failed(outcome: StudyOutcome[Any]) -> None:
    """After everything is written: exit 2 when a system failed for its config, 3 when any backend failed."""
    bad = [s for s in outcome.systems if s.failed]
    if not bad:
        return
    config = [s for s in bad if s.config_error]
    if config:
        raise ConfigError(f"system {config[0].name}: {config[0].index_error}")
    s = bad[0]
    detail = s.index_error or f"{s.failed_queries} queries failed (see status.jsonl); first error, {s.first_error}"
    raise BackendError(f"backend failed for {s.name}: {detail}")


def raise_if_failed(outcome: StudyOutcome[Any]) -> None:
    """After everything is written: `raise_if_backend_failed`, then exit 3 when a stage's every LLM call failed
    (`StudyOutcome.llm_failures`; the first line, and how many more)."""
    raise_if_backend_failed(outcome)
    failed = outcome.llm_failures
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise BackendError(failed[0] + more)
