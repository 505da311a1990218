"""`retbench run` and what reads its results back: `history` and `export mlflow`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from retbench.cli.app import console, handles_errors, repair_journals, stage_bars, write
from retbench.errors import ConfigError, InputError
from retbench.secrets import redact

export_app = typer.Typer(help="Send a results directory to an experiment tracker.", no_args_is_help=True)

if TYPE_CHECKING:
    from rich.console import Console

    from retbench.config import ExperimentModel
    from retbench.results.model import StudyResult
    from retbench.studies.outcome import StudyOutcome


@handles_errors
def run_command(
    config: Annotated[Path, typer.Argument(help="Experiment YAML (datasets, systems, metrics, output).")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Results directory (overrides the config).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Redo systems that finished earlier.")] = False,
    quiet: Annotated[bool, typer.Option(help="No progress bars.")] = False,
    tag: Annotated[
        str | None, typer.Option(help="Tag this run in the history (a gate baseline: history:<tag>).")
    ] = None,
    history: Annotated[
        bool, typer.Option(help="Register the run in the local history (see `retbench history`).")
    ] = True,
    repair: Annotated[
        bool,
        typer.Option(help="Set aside a journal's unreadable tail (to journal.jsonl.dropped) and redo those queries."),
    ] = False,
    services: Annotated[
        str | None,
        typer.Option(
            help="'local': start on 127.0.0.1 the servers the systems need (PostgreSQL + pgvector, Milvus Lite, "
            "Typesense) with generated secrets, point the systems at them, and stop them after the run."
        ),
    ] = None,
) -> None:
    """Run every system on every dataset of an experiment; resumable (finished work is kept)."""
    if services is None:
        _run_command(config, output, force, quiet, tag, history, repair)
        return
    if services != "local":
        raise ConfigError(f"unknown --services {services!r}; the one choice is 'local'", field="--services")
    from retbench.cli.services import config_systems
    from retbench.services import local_services

    con = console()
    log = _logger(con)
    with local_services(config_systems(config), log=log) as running:
        _run_command(config, output, force, quiet, tag, history, repair, point=running.point)


def _logger(con: Console) -> Callable[[str], None]:
    return lambda m: con.print(redact(m), soft_wrap=True, markup=False, highlight=False)


def _run_command(
    config: Path,
    output: Path | None,
    force: bool,
    quiet: bool,
    tag: str | None,
    history: bool,
    repair: bool,
    point: Callable[[str, Mapping[str, object]], dict[str, object]] | None = None,
) -> None:
    """Load, (re)point the systems at local servers when given, run, print, and exit by what failed."""
    from retbench.leaderboard import build_leaderboard
    from retbench.report.terminal import render_costs, render_leaderboard, render_resolution, render_summary
    from retbench.resolution import resolve
    from retbench.studies.benchmark import load_config
    from retbench.studies.outcome import raise_if_failed

    cfg = load_config(config, output)
    if point is not None:
        systems = [s.model_copy(update={"params": point(s.adapter, s.params)}) for s in cfg.systems]
        cfg = cfg.model_copy(update={"systems": systems})
    if repair:
        repair_journals(cfg.output_dir)
    con = console()
    outcome = _run_experiment(cfg, force, quiet, con, history=history, tag=tag)
    con.print(render_summary(outcome.result, cfg.metric_names, title=f"{cfg.study_name}: {cfg.output_dir}"))
    _print_judge_costs(outcome.result, con)
    costs = render_costs(outcome.result)
    if costs is not None:
        con.print(costs)
    metric = cfg.ranking_metric
    board = build_leaderboard(outcome.result, metric)
    if board is not None:
        con.print(render_leaderboard(board))
    elif ranked := resolve([outcome.result.evaluation(s.name) for s in outcome.result if not s.failed], metric):
        con.print(render_resolution(ranked, metric))
    written = "".join(f"{name}, " for name in outcome.reports)
    con.print(f"results: {cfg.output_dir}  (metrics.json, manifest.json, {written}systems/<name>/run.trec)")
    if not outcome.backend_failed:  # a failed backend's exit says enough: its stages' notes would bury it
        for line in outcome.llm_notes:
            con.print(f"note: {line}", soft_wrap=True, markup=False, highlight=False)
    raise_if_failed(outcome)


def _print_judge_costs(result: StudyResult, con: Console) -> None:
    """What the judging stage spent per system (calls made, cache hits, tokens, cost) and "judged N of M"."""
    from retbench.report.judge import judged_line, stats_line

    for system in result:
        block = system.judge
        if not block:
            continue
        con.print(f"{system.name}: {stats_line(block)}", soft_wrap=True, markup=False, highlight=False)
        for m, c in block.get("metrics", {}).items():
            con.print(f"  {m}: {judged_line(c['statuses'])}", soft_wrap=True, markup=False, highlight=False)


def _run_experiment(
    cfg: ExperimentModel, force: bool, quiet: bool, con: Console, *, history: bool, tag: str | None
) -> StudyOutcome:
    """Run the experiment, logging to the console and (unless quiet) showing one progress bar per stage."""
    from retbench.studies.benchmark import run_experiment

    if quiet:
        return run_experiment(
            cfg,
            force=force,
            log=lambda m: con.print(redact(m), soft_wrap=True, markup=False, highlight=False),
            history=history,
            tag=tag,
        )
    with stage_bars(con) as progress:
        return run_experiment(
            cfg,
            force=force,
            progress=progress,
            log=lambda m: con.print(redact(m), soft_wrap=True, markup=False, highlight=False),  # above the bars
            history=history,
            tag=tag,
        )


@handles_errors
def history_command(
    system: Annotated[str | None, typer.Option(help="Only this system (its bare name, or a results key).")] = None,
    experiment: Annotated[str | None, typer.Option(help="Only this experiment (the config's name).")] = None,
    dataset: Annotated[
        str | None, typer.Option(help="Only this dataset: name, name/split, or a corpus/qrels fingerprint prefix.")
    ] = None,
    metric: Annotated[str | None, typer.Option(help="Metric to follow (default: the latest run's first).")] = None,
    limit: Annotated[int, typer.Option(help="The most recent runs to show.")] = 20,
    html: Annotated[Path | None, typer.Option(help="Also write the trend as one HTML file with a chart.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the entries as JSON.")] = False,
    sequential: Annotated[
        bool,
        typer.Option(
            "--sequential",
            help="Also give each series' level an anytime-valid confidence sequence over its runs (valid when "
            "looked at after every nightly run).",
        ),
    ] = False,
    history_file: Annotated[
        Path | None, typer.Option(help="History database (default: $RETBENCH_HISTORY or the per-user one).")
    ] = None,
) -> None:
    """The trend of a metric per (experiment, dataset, system): means with CIs, commit, tag and gate verdict.

    Filters that match nothing (or a metric no matching run recorded) are an error (exit 2) that says what
    the history holds."""
    import json
    from dataclasses import asdict

    from retbench.inputs import canonical_metrics
    from retbench.report.history import render_trend, sequence_lines, series_of, trend_html
    from retbench.results.history_read import entries

    metric = (canonical_metrics([metric]) or [metric])[0] if metric else None
    where = {"experiment": experiment, "dataset": dataset, "system": system}
    rows = entries(history_file, metric=metric, limit=limit, experiment=experiment, dataset=dataset, system=system)
    if metric is None and not as_json:
        latest = next((e for e in reversed(rows) if e.scores), None)
        metric = next(iter(next(iter(latest.scores.values())))) if latest else None
    if not rows or (metric is None and not as_json) or (metric is not None and not series_of(rows, metric)[0]):
        _nothing_to_show(history_file, where, metric)
    if as_json:
        typer.echo(json.dumps([asdict(e) for e in rows], indent=2, default=str))
        return
    assert metric is not None  # checked above: a table follows one metric
    console().print(render_trend(rows, metric))
    for line in sequence_lines(rows, metric) if sequential else []:
        typer.echo(line)
    if html is not None:
        write(html, trend_html(rows, metric))
        typer.echo(f"wrote {html}")


def _nothing_to_show(history_file: Path | None, where: dict[str, str | None], metric: str | None) -> None:
    """Raise the exit-2 error that says what the history holds, in place of an empty table."""
    from retbench.report.history import nothing_matched
    from retbench.results.history_read import entries

    kept = entries(history_file, experiment=where["experiment"], dataset=where["dataset"], system=where["system"])
    filters = {f"--{k}": v for k, v in where.items()}
    raise InputError(nothing_matched(filters, entries(history_file), kept, metric), field="history")


@export_app.command("mlflow")
@handles_errors
def export_mlflow_command(
    results: Annotated[Path, typer.Argument(help="A results directory (from `retbench run`).")],
    tracking_uri: Annotated[
        str | None, typer.Option(help="MLflow tracking URI (default: MLFLOW_TRACKING_URI or MLflow's own default).")
    ] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: the experiment's name).")] = None,
    artifact_location: Annotated[
        str | None,
        typer.Option(
            help="Artifact location when the MLflow experiment is created here (default: for a sqlite:/// store, "
            "mlartifacts/ beside the database file; a server keeps its own)."
        ),
    ] = None,
    timeout: Annotated[int, typer.Option(help="Seconds a tracking server gets per request (2 retries).")] = 30,
) -> None:
    """Log params (config, fingerprints, versions), metrics (means, CI bounds, coverage) and artifacts to MLflow."""
    from retbench.results.mlflow_export import export_mlflow

    out = export_mlflow(
        results, tracking_uri=tracking_uri, experiment=experiment, artifact_location=artifact_location, timeout=timeout
    )
    if out.get("existing"):
        typer.echo(
            f"already in MLflow experiment {out['experiment_id']}: parent run {out['parent_run_id']} "
            "(the same results; nothing logged again)"
        )
    else:
        typer.echo(f"logged to MLflow experiment {out['experiment_id']}: parent run {out['parent_run_id']}")
    for system, run_id in out["runs"].items():
        typer.echo(f"  {system}: run {run_id}")
    typer.echo(f"artifacts: {out['artifact_location']}")
