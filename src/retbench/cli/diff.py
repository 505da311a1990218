"""`retbench diff`: how much a candidate's results move from the current system's, with no labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retbench.cli.app import handles_errors, write


@handles_errors
def diff_command(
    run_a: Annotated[Path, typer.Argument(help="The current system: a TREC run file or a results directory.")],
    run_b: Annotated[Path, typer.Argument(help="The candidate: a TREC run file or a results directory.")],
    k: Annotated[int, typer.Option(help="The top k compared.")] = 10,
    p: Annotated[float, typer.Option(help="RBO's persistence (0.9: 86% of the weight on the first 10 ranks).")] = 0.9,
    system_a: Annotated[str | None, typer.Option(help="The system of RUN_A when it is a results directory.")] = None,
    system_b: Annotated[str | None, typer.Option(help="The system of RUN_B when it is a results directory.")] = None,
    qrels: Annotated[
        Path | None, typer.Option(help="Qrels for some queries: does movement predict the metric's change there?")
    ] = None,
    metric: Annotated[str, typer.Option(help="The metric of that check.")] = "ndcg@10",
    queries: Annotated[Path | None, typer.Option(help="BEIR queries.jsonl: texts for the moved queries.")] = None,
    top: Annotated[int, typer.Option(help="Moved queries and shifted documents to list.")] = 10,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples of each interval.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed of the resampling.")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the diff as JSON.")] = None,
    markdown_out: Annotated[Path | None, typer.Option("--markdown", help="Write the diff as Markdown.")] = None,
    html_out: Annotated[Path | None, typer.Option("--html", help="Write the diff as an HTML page.")] = None,
) -> None:
    """Label-free comparison of two runs: RBO, Jaccard/overlap@k, Kendall/Spearman, top-k churn, moved queries.

    Decide where labels are worth spending before spending them (see the docs' label-free how-to)."""
    import json

    from retbench.io.beir import read_queries
    from retbench.movement import diff
    from retbench.report.diff import diff_html, diff_markdown

    texts = dict(read_queries(queries).items()) if queries is not None else None
    d = diff(
        run_a,
        run_b,
        k=k,
        p=p,
        system_a=system_a,
        system_b=system_b,
        qrels=qrels,
        metric=metric,
        queries=texts,
        top=top,
        n_resamples=resamples,
        seed=seed,
    )
    text = diff_markdown(d)
    typer.echo(text)
    write(markdown_out, text)
    write(html_out, diff_html(d) if html_out is not None else "")
    write(json_out, json.dumps(d.to_dict(), indent=2, allow_nan=False) + "\n")


@handles_errors
def canary_command(
    config: Annotated[
        Path, typer.Argument(help="Experiment config: two systems (current first, candidate second), one dataset.")
    ],
    out: Annotated[Path, typer.Option(help="Folder for the runs, the canary report and the label study.")],
    k: Annotated[int, typer.Option(help="The top k compared and pooled.")] = 10,
    p: Annotated[float, typer.Option(help="RBO's persistence.")] = 0.9,
    study: Annotated[bool, typer.Option(help="Pool the changed queries' pairs as a label study (OUT/study).")] = True,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples of each interval.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed of the resampling.")] = 0,
) -> None:
    """Migration canary: search the current system and the candidate over a query log (qrels optional), say how
    many queries change their top k and which, and pool only those for labelling."""
    from retbench.report.diff import diff_markdown
    from retbench.studies.canary import run_canary  # deferred: the benchmark machinery (CLI start-up time)

    done = run_canary(
        config, out, k=k, p=p, study=study, n_resamples=resamples, seed=seed, note=lambda m: typer.echo(m, err=True)
    )
    typer.echo(diff_markdown(done.diff))
    typer.echo(f"written: {out / 'canary.md'}, {out / 'canary.html'}, {out / 'canary.json'}", err=True)
