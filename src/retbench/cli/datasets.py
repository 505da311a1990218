"""`retbench datasets list|info`: the shipped corpora and what a dataset holds."""

from __future__ import annotations

from typing import Annotated

import typer

from retbench.cli.app import console, handles_errors

datasets_app = typer.Typer(help="Inspect datasets: shipped corpora or BEIR folders.", no_args_is_help=True)


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
    dataset: Annotated[
        str,
        typer.Argument(
            help="A shipped dataset name (e.g. scifact), a BEIR folder, hf:<name> or irds:<ir_datasets id>."
        ),
    ],
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
    from retbench.report.terminal import render_dataset_info

    console().print(render_dataset_info(info))
