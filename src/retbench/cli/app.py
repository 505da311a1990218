"""What every command shares: the error decorator, the console, small file helpers (the Typer app and its
command table are in `retbench.cli`).

Exit codes: 0 ok; 1 a gate failed; 2 usage or input error, or an output that could not be written; 3 a backend
failed. Library errors carry their exit code (`retbench.errors`); `handles_errors` prints them as one line, never
a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

from retbench.errors import EXIT_INPUT, RetbenchError
from retbench.io.files import os_reason, write_text
from retbench.jsontypes import JSONObject
from retbench.secrets import redact

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID

F = TypeVar("F", bound=Callable[..., object])


def fail(message: str, code: int = EXIT_INPUT) -> typer.Exit:
    """Print one clear line to stderr and return the Exit to raise."""
    typer.echo(f"error: {redact(message)}", err=True)
    return typer.Exit(code)


def handles_errors(func: F) -> F:
    """Turn library errors into one message and their exit code, never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: object, **kwargs: object) -> object:
        try:
            return func(*args, **kwargs)
        except RetbenchError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except FileNotFoundError as exc:
            raise fail(f"{exc.filename}: file not found") from None
        except OSError as exc:
            if exc.filename is None:  # a socket or process error is a backend's, not an input's
                raise
            raise fail(f"{exc.filename}: {os_reason(exc)}") from None
        except UnicodeDecodeError as exc:
            raise fail(f"input is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except RecursionError:
            raise fail("input is nested too deeply to read") from None

    return wrapper  # type: ignore[return-value]


def console() -> Console:
    """Rich console: `COLUMNS` when set, else the terminal's width; piped output (CI logs, files) without
    `COLUMNS` gets 160 columns instead of rich's 80, so tables need to fold less."""
    from rich.console import Console

    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return Console(width=int(columns))
    return Console() if sys.stdout.isatty() else Console(width=160)


def names(text: str | None) -> list[str] | None:
    """'a, b' -> ['a', 'b'] (None when not given)."""
    return [s.strip() for s in text.split(",") if s.strip()] if text else None


def write(path: Path | None, text: str) -> None:
    """Write an output file the person asked for (nothing when the option was not given), through the one writer."""
    if path is not None:
        write_text(path, text)


def json_object(text: str, option: str) -> JSONObject:
    """An option's value parsed as a JSON object, or one error line naming the option."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{option} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise fail(f"{option} must be a JSON object")
    return value


def repair_journals(output: Path) -> None:
    """`--repair`: cut every journal under the output folder back to its last readable record."""
    from retbench.results.journal import repair_journal

    for journal in sorted(output.rglob("journal.jsonl")) if output.is_dir() else []:
        dropped = repair_journal(journal)
        if dropped:
            typer.echo(f"repaired {journal}: {dropped} line(s) set aside in {journal.name}.dropped", err=True)


@contextlib.contextmanager
def stage_bars(con: Console, suffix: str = "") -> Iterator[Callable[[str, int, int], None]]:
    """Progress bars on `con`, one per stage, for a `progress(stage, done, total)` callback (a run's stages,
    a comparison's resampled tests); `suffix` is added to each stage's label."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=con
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(f"{stage}{suffix}", total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield progress
