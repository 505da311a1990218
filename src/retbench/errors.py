"""Errors a person can act on.

Every error the CLI shows names the file, line and field it is about, and maps to one of the
exit codes the CLI documents (0 ok, 1 a gate failed): 2 usage or input error, or an output file that could not be
written (disk full, no permission), 3 a backend failed during the run.
"""

from __future__ import annotations

from pathlib import Path

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_INPUT = 2
EXIT_BACKEND = 3


class RetbenchError(Exception):
    """Base class: carries the exit code the CLI uses for it."""

    exit_code = EXIT_INPUT


class InputError(RetbenchError, ValueError):
    """Bad input: a file, line or field a person can go and fix."""

    exit_code = EXIT_INPUT

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.reason = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.line is not None:
                where += f":{self.line}"
        parts = []
        if where:
            parts.append(where)
        if self.field is not None:
            parts.append(f"field '{self.field}'")
        prefix = ": ".join(parts)
        return f"{prefix}: {self.reason}" if prefix else self.reason


class ConfigError(InputError):
    """A config file (experiment, criteria) that cannot be used as written."""


class BackendError(RetbenchError):
    """A retriever backend failed; the message carries the backend's error verbatim."""

    exit_code = EXIT_BACKEND


class OutputError(InputError):
    """A file retbench was asked to write could not be written (disk full, file too large, no permission).

    It names the file the person asked for (never the temporary file beside it) and the system's reason;
    exit code 2 like bad input, since the fix (free space, another --output) is the person's to make.
    """
