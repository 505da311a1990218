"""`retbench label ...`: a label study's commands. `serve`: the labelling page people grade pairs on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retbench.cli.app import handles_errors

label_app = typer.Typer(help="Label a study's pooled pairs: the page people grade on.", no_args_is_help=True)


@label_app.command("serve")
@handles_errors
def serve(
    study: Annotated[Path, typer.Argument(help="The study folder (study.json, pairs.jsonl; labels.jsonl is added).")],
    port: Annotated[int, typer.Option(help="Port (0 picks a free one; the URL is printed).")] = 8765,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    labeller: Annotated[
        str | None, typer.Option(help="Name every label from this page is stored under (else the page asks once).")
    ] = None,
) -> None:
    """Serve the labelling page: query and document side by side, grades by keyboard (digits; s skip; u undo;
    ? help), the LLM's grade shown only after yours is stored, the live estimate per system. Every label is
    fsynced to STUDY/labels.jsonl before the next pair shows."""
    from retbench.labelapp.server import serve as serve_page  # deferred: `retbench --help` loads no web stack

    serve_page(study, host=host, port=port, labeller=labeller)
