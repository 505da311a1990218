"""The `retbench` command: parse, call the library, render. No logic of its own.

Exit codes: 0 ok; 1 a gate failed; 2 usage or input error; 3 a backend failed.
Each module holds one family of commands; this file is the command table (`COMMANDS`), in the order
`retbench --help` lists them. A command's module is imported, and its options built, only when that command
runs (or when `retbench --help` lists them all): `retbench eval` pays for `eval` alone. Heavy libraries are
imported inside command bodies, so keep the top of every module here light (benchmarks/startup.py measures it;
tests/integration/cli/test_startup.py lists what `retbench eval` may import).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup
from typer.models import CommandInfo, TyperInfo

from retbench.cli.app import console, fail, handles_errors
from retbench.secrets import redact

#: command name -> "module:attribute" in retbench.cli: a command function, or a Typer app of subcommands
COMMANDS: dict[str, str] = {
    "run": "run:run_command",
    "stress": "studies:stress_command",
    "chunking": "studies:chunking_command",
    "tune": "tune:tune_command",
    "compare": "compare:compare_command",
    "diff": "diff:diff_command",
    "canary": "diff:canary_command",
    "gate": "compare:gate_command",
    "report": "compare:report_command",
    "plan": "plan:plan_command",
    "history": "run:history_command",
    "serve": "serve:serve_command",
    "ingest-impact": "studies:ingest_impact_command",
    "values": "studies:values_command",
    "eval": "evaluate:eval_command",
    "metrics": "evaluate:metrics_command",
    "judge-relevance": "judge:judge_relevance",
    "judge-calibrate": "judge:judge_calibrate",
    "synth": "judge:synth",
    "schema": "schema:schema_command",
    "datasets": "datasets:datasets_app",
    "export": "run:export_app",
    "traces": "traces:traces_app",
    "runs": "runs:runs_app",
    "services": "services:services_app",
    "label": "label:label_app",
}


def _build(name: str, target: object) -> Any:
    """One entry of the table as Typer builds it for `app.command(name)` or `app.add_typer(target, name=name)`."""
    if isinstance(target, typer.Typer):
        return typer.main.get_group_from_info(
            TyperInfo(target, name=name),
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=app.rich_markup_mode,
            suggest_commands=app.suggest_commands,
        )
    return typer.main.get_command_from_info(
        CommandInfo(name=name, callback=target),  # type: ignore[arg-type]
        pretty_exceptions_short=app.pretty_exceptions_short,
        rich_markup_mode=app.rich_markup_mode,
    )


class _Commands(MutableMapping[str, Any]):
    """The group's commands by name, in table order; an entry of `COMMANDS` is built on first lookup."""

    def __init__(self, table: dict[str, str]) -> None:
        self._table = dict(table)
        self._built: dict[str, Any] = {}
        self._order = list(table)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            module, _, attribute = self._table[name].partition(":")
            self._built[name] = _build(name, getattr(importlib.import_module(f"{__name__}.{module}"), attribute))
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        if name not in self:
            self._order.append(name)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._table.pop(name, None)
        self._built.pop(name, None)
        self._order.remove(name)

    def __contains__(self, name: object) -> bool:
        return name in self._table or name in self._built

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)


class LazyGroup(TyperGroup):
    """The top-level group: its commands come from `COMMANDS`, each built when first looked up."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _Commands(COMMANDS)


def _before_any_command() -> None:
    """Nothing: a group callback, so Typer builds a group although no command is registered with it."""


app = typer.Typer(
    name="retbench",
    help="A workbench for benchmarking retrievers.",
    cls=LazyGroup,
    callback=_before_any_command,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help text: rich's help rendering alone costs ~0.4 s per call
)


#: OpenBLAS (the BLAS in NumPy's wheels) starts a worker thread per CPU that busy-waits 2^28 cycles for work
#: before it sleeps: about 0.05 CPU s that a short command (`retbench eval` on a small run) burns at every call.
#: 2^20 cycles (under a millisecond) still keeps the workers awake between back-to-back matrix products. A value
#: the person set is kept; other BLAS libraries ignore the variable.
BLAS_SPIN = ("OPENBLAS_THREAD_TIMEOUT", "20")


def main() -> None:
    """Console-script entry point."""
    os.environ.setdefault(*BLAS_SPIN)  # before anything imports NumPy: OpenBLAS reads it when it loads
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception:  # a bug: the traceback as Python prints it, exit 1, but redacted like every other output
        sys.stderr.write(redact(traceback.format_exc()))
        sys.exit(1)


__all__ = ["COMMANDS", "app", "console", "fail", "handles_errors", "main"]
