"""The `retbench` command: parse, call the library, render. No logic of its own.

Exit codes (DESIGN.md): 0 ok; 1 a gate failed; 2 usage or input error; 3 a backend failed.
Heavy libraries are imported inside commands so `retbench --help` starts fast.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from retbench.errors import EXIT_INPUT, RetbenchError

app = typer.Typer(
    name="retbench",
    help="A workbench for benchmarking retrievers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
datasets_app = typer.Typer(help="Inspect datasets: shipped corpora or BEIR folders.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = EXIT_INPUT) -> typer.Exit:
    """Print one clear line to stderr and return the Exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def handles_errors(func: F) -> F:
    """Turn library errors into one message and their exit code, never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RetbenchError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except FileNotFoundError as exc:
            raise fail(f"{exc.filename}: file not found") from None

    return wrapper  # type: ignore[return-value]


def console() -> Any:
    from rich.console import Console

    return Console()


# -- datasets ---------------------------------------------------------------------------------
@datasets_app.command("list")
@handles_errors
def datasets_list() -> None:
    """Datasets shipped with retbench (usable by name anywhere a dataset is asked for)."""
    from retbench.io.datasets import shipped

    for name, path in shipped().items():
        typer.echo(f"{name}\t{path}")


@datasets_app.command("info")
@handles_errors
def datasets_info(
    dataset: Annotated[str, typer.Argument(help="A shipped dataset name (e.g. scifact) or a BEIR folder.")],
    strict: Annotated[bool, typer.Option(help="Unknown ids in qrels are errors, not warnings.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Counts, grade histogram, document lengths and problems found in a dataset."""
    import json

    from retbench.io.datasets import dataset_info, load_dataset

    ds = load_dataset(dataset, strict=strict)
    info = dataset_info(ds)
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    from retbench.report.text import render_dataset_info

    console().print(render_dataset_info(info))


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


