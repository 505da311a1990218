"""`retbench schema [KIND]`: print a config kind's JSON Schema (for editors and CI checks)."""

from __future__ import annotations

from typing import Annotated

import typer

from retbench.cli.app import fail, handles_errors


@handles_errors
def schema_command(
    kind: Annotated[
        str,
        typer.Argument(help="experiment, suite, chunking, ingest-impact, stress, judge, calibration or criteria."),
    ] = "experiment",
) -> None:
    """Print the JSON Schema of a config kind (validate configs or point an editor at it)."""
    from retbench.config.schema import KINDS, schema_text

    if kind not in KINDS:
        listing = "; ".join(f"{k} ({what})" for k, (_, what) in KINDS.items())
        raise fail(f"unknown config kind {kind!r}; kinds: {listing}")
    typer.echo(schema_text(kind), nl=False)
