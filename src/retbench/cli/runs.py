"""`retbench runs convert` and `retbench runs fingerprint`: run files between TREC text and columnar form."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retbench.cli.app import fail, handles_errors

runs_app = typer.Typer(
    help="Run files: convert between TREC text and columnar (Arrow IPC, Parquet); print fingerprints.",
    no_args_is_help=True,
)

FORMATS = ("auto", "trec", "arrow", "parquet")


@runs_app.command("convert")
@handles_errors
def runs_convert(
    source: Annotated[Path, typer.Argument(help="A run file: TREC text, Arrow IPC or Parquet (told by its bytes).")],
    target: Annotated[Path, typer.Argument(help="The file to write (its suffix picks the format with --to auto).")],
    to: Annotated[
        str,
        typer.Option(
            help="auto (.arrow/.feather/.ipc: Arrow IPC, .parquet: Parquet, anything else: TREC text), "
            "trec, arrow or parquet."
        ),
    ] = "auto",
    tag: Annotated[str | None, typer.Option(help="The run tag written (default: the source's own).")] = None,
) -> None:
    """Convert a run file; prints the run's fingerprint, the same for every form of the same run."""
    from retbench.io.files import replace_atomically
    from retbench.io.run_columns import PARQUET_SUFFIXES, run_fingerprint, write_run_columns
    from retbench.io.trec import read_run, write_run

    if to not in FORMATS:
        raise fail(f"--to must be one of {', '.join(FORMATS)}, got {to!r}")
    if target.resolve() == source.resolve():
        raise fail(f"{target}: the target is the source file; write the conversion elsewhere")
    run = read_run(source)
    kind = to if to != "auto" else _by_suffix(target)
    if kind == "parquet" and target.suffix not in PARQUET_SUFFIXES:
        raise fail(f"{target}: a Parquet file needs a .parquet suffix (the writer picks the format by it)")
    if kind == "arrow" and target.suffix in PARQUET_SUFFIXES:
        raise fail(f"{target}: an Arrow IPC file cannot have a .parquet suffix")
    if kind == "trec":
        replace_atomically(target, lambda tmp: write_run(run, tmp, tag=tag))
        fingerprint = run_fingerprint(run)
    else:
        fingerprint = write_run_columns(run, target, tag=tag)
    n = len(run.scores)
    typer.echo(f"wrote {target} ({kind}, {len(run)} queries, {n} ranked docs), fingerprint {fingerprint}")


@runs_app.command("fingerprint")
@handles_errors
def runs_fingerprint(
    files: Annotated[list[Path], typer.Argument(help="Run files (TREC text, Arrow IPC or Parquet).")],
) -> None:
    """Print each run file's fingerprint: a TREC file and its columnar copy print the same one."""
    from retbench.io.run_columns import run_fingerprint
    from retbench.io.trec import read_run

    for f in files:
        typer.echo(f"{run_fingerprint(read_run(f))}  {f}")


def _by_suffix(target: Path) -> str:
    suffix = target.suffix.lower()
    if suffix in (".arrow", ".feather", ".ipc"):
        return "arrow"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    return "trec"
