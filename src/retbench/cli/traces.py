"""`retbench traces import`: trace files in, a BEIR-style dataset folder with the live system's run out."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated

import typer

from retbench.cli.app import fail, handles_errors

traces_app = typer.Typer(help="Production traces in: queries and the live system's run.", no_args_is_help=True)


def _when(text: str | None, option: str) -> datetime | None:
    """An option's ISO-8601 time (a date, or a time without a zone, is UTC)."""
    if text is None:
        return None
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise fail(f"{option}: {text!r} is not an ISO-8601 time (e.g. 2026-05-01 or 2026-05-01T12:00:00Z)") from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


@traces_app.command("import")
@handles_errors
def traces_import(
    files: Annotated[
        list[Path],
        typer.Argument(help="Trace files: OTLP JSON/JSONL/protobuf, Phoenix or Langfuse exports, plain JSONL."),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="The dataset folder to write (queries, corpus, runs/, feedback, import.json).")
    ],
    fmt: Annotated[
        str, typer.Option("--format", help="otlp, phoenix, langfuse, jsonl or auto (decided per file).")
    ] = "auto",
    max_queries: Annotated[
        int | None, typer.Option(min=1, help="Keep at most this many distinct queries (seeded sample).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the --max-queries sample.")] = 0,
    since: Annotated[
        str | None, typer.Option(help="Only spans that started at or after this ISO-8601 time (UTC if no zone).")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Only spans that started before this ISO-8601 time (UTC if no zone).")
    ] = None,
    system: Annotated[str | None, typer.Option(help="Name of the live run (default: live-<trace source>).")] = None,
    id_key: Annotated[
        str, typer.Option(help="Metadata key holding a document's id when the span has no document.id.")
    ] = "id",
    corpus: Annotated[
        Path | None, typer.Option(help="A BEIR corpus.jsonl: texts it already holds are not written again.")
    ] = None,
    strict: Annotated[
        bool, typer.Option(help="Exit 2 when any span is malformed (the folder is still written).")
    ] = False,
) -> None:
    """Read production traces into queries, the live system's TREC run and the document texts seen."""
    from retbench.io.traces import import_traces  # deferred: keeps `retbench --help` fast

    done = import_traces(
        files,
        out,
        fmt=fmt,
        max_queries=max_queries,
        seed=seed,
        since=_when(since, "--since"),
        until=_when(until, "--until"),
        system=system,
        id_key=id_key,
        corpus=corpus,
    )
    for problem in done.problems:
        typer.echo(f"malformed: {problem}", err=True)
    s = done.summary
    typer.echo(
        f"{s['spans']} spans: {s['retriever_spans']} retriever, {s['malformed']['count']} malformed, "
        f"{sum(s['other_spans'].values())} other kinds"
    )
    d = s["duplicates"]
    typer.echo(
        f"{s['retrievals']} retrievals in the window -> {d['queries']} queries "
        f"({d['exact']} exact and {d['near']} near duplicates merged); {s['sampled']['kept']} kept"
    )
    typer.echo(f"wrote {done.out} (run: runs/{done.system}.trec)")
    if strict and done.problems:
        raise typer.Exit(2)
