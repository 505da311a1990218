"""`retbench tune CONFIG`: choose a system's setting by cross-validation over queries."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retbench.cli.app import console, handles_errors, stage_bars


@handles_errors
def tune_command(
    config: Annotated[Path, typer.Argument(help="Tuning YAML: an experiment, one of its systems, a grid, a metric.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Results directory (overrides the config).")
    ] = None,
    max_queries: Annotated[
        int | None, typer.Option("--max-queries", help="Tune on the first N queries only (a quick slice).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Search settings that finished earlier again.")] = False,
    quiet: Annotated[bool, typer.Option(help="No progress bars.")] = False,
) -> None:
    """Search every setting of a grid once and choose by k-fold cross-validation; print the out-of-sample estimate."""
    # deferred: the study imports the runner (and its heavy dependencies) only when the command runs
    from retbench.report.tune import candidate_lines, tune_lines
    from retbench.studies.tune import load_config, run_tune

    cfg = load_config(config, output, max_queries)
    con = console()
    if quiet:
        outcome = run_tune(cfg, log=lambda m: con.print(m), force=force)
    else:
        with stage_bars(con) as progress:  # the bars `retbench run` shows: each setting's index and search
            outcome = run_tune(cfg, log=lambda m: con.print(m), force=force, progress=progress)
    labels = [s.label for s in outcome.settings]
    for line in tune_lines(outcome.result, labels, cfg.metric, len(outcome.query_ids)):
        typer.echo(line)
    for line in candidate_lines(outcome.candidates, outcome.resolution, cfg.metric):
        typer.echo(line)
    typer.echo(
        f"wrote {cfg.output_dir / 'tune.json'}, {cfg.output_dir / 'report.html'} and {cfg.output_dir / 'chosen.yaml'} "
        "(the chosen system, ready to paste)"
    )
