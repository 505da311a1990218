"""The study commands: `retbench stress`, `chunking`, `ingest-impact` and `values` (one config file each)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retbench.cli.app import console, fail, handles_errors, repair_journals
from retbench.errors import ConfigError
from retbench.secrets import redact


@handles_errors
def stress_command(
    config: Annotated[
        Path, typer.Argument(help="Stress YAML: one dataset, one system (optional faults), a stress block.")
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Results directory (overrides the config).")
    ] = None,
    fresh: Annotated[bool, typer.Option(help="Discard the journal of an earlier (interrupted) stress run.")] = False,
    repair: Annotated[
        bool, typer.Option(help="Set aside a journal's unreadable tail (to journal.jsonl.dropped) and redo that work.")
    ] = False,
    services: Annotated[
        str | None,
        typer.Option(
            help="'local': start on 127.0.0.1 the server the system needs (PostgreSQL + pgvector, Milvus Lite, "
            "Typesense), point the system at it, and stop it after the run."
        ),
    ] = None,
) -> None:
    """Drive one system under load (and faults), or search while data changes; exit 3 when failures exceed the allowed rate."""
    from retbench.report.stress import describe_failure, headline
    from retbench.studies.stress import load_config, run_stress

    echo = lambda m: typer.echo(redact(m))  # noqa: E731
    if services is None:
        cfg = load_config(config, output)
        if repair:
            repair_journals(cfg.output_dir)
        result = run_stress(cfg, fresh=fresh, echo=echo)
    elif services != "local":
        raise ConfigError(f"unknown --services {services!r}; the one choice is 'local'", field="--services")
    else:
        from retbench.cli.services import config_systems
        from retbench.services import local_services

        # the servers first: they set the secret variables the config's systems name, which loading checks
        with local_services(config_systems(config), log=echo) as running:
            cfg = load_config(config, output)
            if repair:
                repair_journals(cfg.output_dir)
            system = cfg.system
            pointed = system.model_copy(update={"params": running.point(system.adapter, system.params)})
            result = run_stress(cfg.model_copy(update={"systems": [pointed]}), fresh=fresh, echo=echo)
    typer.echo(f"{headline(result.summary)}; report: {result.out_dir / 'report.md'}")
    if result.exit_code:
        first = result.first_failure
        raise fail(
            f"backend failed: {describe_failure(first) if first else 'failure rate over the allowed rate'}",
            result.exit_code,
        )


@handles_errors
def chunking_command(
    config: Annotated[Path, typer.Argument(help="Chunking YAML: chunking set, chunkers, systems, budgets.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Results directory (overrides the config).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Redo (chunker, system) pairs that finished earlier.")] = False,
) -> None:
    """Compare chunkers x retrievers with span relevance; writes a results directory, report.md and report.html."""
    from retbench.report.terminal import render_chunking
    from retbench.studies.chunking import load_config, run_chunking
    from retbench.studies.outcome import raise_if_backend_failed

    cfg = load_config(config, output)
    con = console()
    outcome = run_chunking(cfg, force=force, log=lambda m: con.print(redact(m)))
    con.print(render_chunking(cfg, outcome.result))
    con.print(
        f"results: {cfg.output_dir}  (report.md, report.html, metrics.json, manifest.json, systems/<chunker>+<system>/)"
    )
    raise_if_backend_failed(outcome)  # type: ignore[arg-type]


@handles_errors
def ingest_impact_command(
    config: Annotated[
        Path, typer.Argument(help="Ingestion YAML: dataset, retriever, candidates, modes, gain weights.")
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Results directory (overrides the config).")
    ] = None,
    top: Annotated[int, typer.Option(help="Rows of the ranked table to print (all are in report.md).")] = 20,
) -> None:
    """Rank candidate documents by knowledge gain (novelty, metric deltas, affected queries); writes report.md."""
    from rich.table import Table

    from retbench.report.impact import impact_rows
    from retbench.studies.impact import load_ingest_config, run_ingest

    cfg = load_ingest_config(config, output)
    con = console()
    outcome = run_ingest(cfg, log=lambda m: con.print(redact(m)))
    if "alone" in outcome.results:
        header, rows = impact_rows(
            outcome.results["alone"][:top], outcome.metrics, outcome.result.gain.recall, compact=True
        )
        table = Table(
            *header,
            title=f"{cfg.study_name}: candidates ranked by gain (top {min(top, len(outcome.results['alone']))})",
        )
        for r in rows:
            table.add_row(*r)
        con.print(table)
    con.print(f"results: {cfg.output_dir}  (report.md, candidates.json, summary.json, manifest.json)")


@handles_errors
def values_command(
    config: Annotated[
        Path, typer.Argument(help="Values YAML: dataset, retriever, utility (precision, recall, ndcg) and k.")
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Results directory (overrides the config).")
    ] = None,
) -> None:
    """The value of every document for the queries (KNN-Shapley, leave-one-out), harmful documents, leaks."""
    from retbench.studies.values import load_values_config, run_values  # deferred: start-up time

    cfg = load_values_config(config, output)
    con = console()
    outcome = run_values(cfg, log=lambda m: con.print(redact(m)))
    s = outcome.summary
    con.print(
        f"{s.documents} documents: {s.positive} help, {s.zero} do nothing, {s.negative} hurt; "
        f"leaks: {s.leaks.queries} queries"
    )
    con.print(f"results: {cfg.output_dir}  (report.md, values.json, summary.json, manifest.json)")
