"""`retbench label ...`: a label study (pool the systems, pre-label with the judge, choose the pairs people
grade, answer with PPI). Parse, call `retbench.studies.labels`, render; `label serve` (the labelling page)
is registered beside these."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from retbench.cli.app import fail, handles_errors

label_app = typer.Typer(
    help="Label study: pool, pre-label with an LLM judge, choose pairs for people, answer with PPI."
)


def _decision(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise fail(f"--decision takes two systems, A,B (got {text!r})")
    return parts[0], parts[1]


@label_app.command("init")
@handles_errors
def init_command(
    study: Annotated[Path, typer.Argument(help="The study folder to create.")],
    dataset: Annotated[
        str, typer.Option(help="A BEIR folder (qrels optional: a trace import's folder), or a shipped name.")
    ],
    systems: Annotated[
        list[Path] | None,
        typer.Option(
            "--systems",
            help="Results directories of `retbench run` (systems/*/run.trec), or experiment configs (YAML) whose "
            "systems are searched over the dataset here.",
        ),
    ] = None,
    runs: Annotated[
        list[Path] | None, typer.Option("--runs", help="TREC run files (the live system's, others).")
    ] = None,
    k: Annotated[int, typer.Option(help="Pool the top k of every system.")] = 10,
    metric: Annotated[str | None, typer.Option(help="nDCG@k or P@k (default nDCG@k).")] = None,
    decision: Annotated[str | None, typer.Option(help="A,B: the difference B − A is what the study decides.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the labelling queue.")] = 0,
    split: Annotated[str | None, typer.Option(help="Only the queries of this qrels split.")] = None,
) -> None:
    """Pool the systems' top k over the dataset's queries and write STUDY/ (study.json, runs/, pairs.jsonl)."""
    from retbench.studies.labels.study import init_study

    given = [*(systems or []), *(runs or [])]
    folder_runs = sorted((Path(dataset) / "runs").glob("*.trec")) if Path(dataset).is_dir() else []
    if not given and not folder_runs:
        raise fail("give the systems to compare: --systems RESULTS_DIR and/or --runs RUN.trec")
    made = init_study(
        study,
        dataset,
        [*folder_runs, *given],
        k=k,
        metric=metric,
        decision=_decision(decision),
        seed=seed,
        split=split,
        note=lambda line: typer.echo(line, err=True),
    )
    queries = len({p["qid"] for p in made.pairs})
    typer.echo(
        f"{study}: {len(made.systems)} systems ({', '.join(made.systems)}), {queries} queries, {len(made.pairs)} pooled pairs"
    )


@label_app.command("prelabel")
@handles_errors
def prelabel_command(
    study: Annotated[Path, typer.Argument(help="The study folder.")],
    judge: Annotated[Path, typer.Option("--judge", help="A YAML file with a judge: block.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (calls, tokens, cost) and stop.")] = False,
) -> None:
    """Grade every pair without an ok verdict with the pinned judge (cached, logged in STUDY/judge_calls.jsonl)."""
    from retbench.cli.judge import _exit_if_judge_failed, _judge_settings
    from retbench.llm.judge import Judge, open_base_url
    from retbench.report.judge import estimate_line, identity_line, judged_line, stats_line
    from retbench.studies.labels import relevance as rl
    from retbench.studies.labels.study import llm_statuses, prelabel

    settings, _ = _judge_settings(judge)
    with open_base_url(settings) as url:
        j = Judge(settings, base_url=url, log_path=study / rl.CALLS_FILE)
        typer.echo(identity_line(j.identity.to_dict()))
        made, plan = prelabel(study, j, dry_run=dry_run)
        typer.echo(estimate_line(plan))
        if dry_run:
            return
    statuses = llm_statuses(made)
    typer.echo(judged_line(statuses) + f" -> {study / 'pairs.jsonl'}")
    if made.meta.get("judge"):
        typer.echo(stats_line(made.meta["judge"]["stats"]))
    _exit_if_judge_failed({s: c for s, c in statuses.items() if s != "none"})


@label_app.command("next")
@handles_errors
def next_command(
    study: Annotated[Path, typer.Argument(help="The study folder.")],
    budget: Annotated[int, typer.Option(help="How many more pairs people will grade.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """The next pairs people should grade (the queue) and the interval expected once they are graded."""
    from retbench.studies.labels.answer import plan_next

    if budget < 1:
        raise fail(f"--budget must be a positive integer, got {budget}")
    plan = plan_next(study, budget)
    if as_json:
        typer.echo(json.dumps(plan, indent=2, allow_nan=False))
        return
    from retbench.studies.labels.study import read_study

    pairs = read_study(study).pairs
    typer.echo("pair_id\tqid\tdoc_id\torder\tpi")
    for pid in plan["pairs"]:
        p = pairs[pid]
        typer.echo(f"{pid}\t{p['qid']}\t{p['doc_id']}\t{p['order']}\t{p['pi']:.3f}")
    current = plan["current"]
    for name, half in plan["expected_half_width"].items():
        block = current["difference"] if name == "difference" else current["systems"][name]
        now = (block["high"] - block["low"]) / 2 if block.get("high") is not None else float("nan")
        typer.echo(
            f"{name}: {block['mean']:.4f} ± {now:.4f} now; ± {half:.4f} expected after these {len(plan['pairs'])} pairs"
        )


@label_app.command("status")
@handles_errors
def status_command(
    study: Annotated[Path, typer.Argument(help="The study folder.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
) -> None:
    """Verdicts, people's labels, and the study's answer so far."""
    from retbench.report.label_study import answer_lines
    from retbench.studies.labels.answer import estimate_study
    from retbench.studies.labels.study import llm_statuses, read_study

    answer = estimate_study(study)
    if as_json:
        typer.echo(json.dumps(answer, indent=2, allow_nan=False))
        return
    made = read_study(study)
    statuses = ", ".join(f"{c} {s}" for s, c in sorted(llm_statuses(made).items()))
    labels = answer["labels"]
    typer.echo(
        f"{len(made.pairs)} pooled pairs; judge verdicts: {statuses}; graded by people: {labels['pairs_graded']}"
    )
    for note in labels["notes"]:
        typer.echo(f"note: {note}", err=True)
    for line in answer_lines(answer, int(made.meta["k"])):
        typer.echo(line)
    for line in agreement_lines(study):
        typer.echo(line)


def agreement_lines(study: Path) -> list[str]:
    """People's agreement (the label log's `agreement_summary`): one line per two labellers with common pairs."""
    from retbench.studies.labels.log import agreement_summary

    summary = agreement_summary(study)
    return [
        f"agreement {row['a']} vs {row['b']}: Cohen's kappa "
        f"{'undefined' if row['kappa'] is None else format(row['kappa'], '.2f')} on {row['n']} pairs both graded "
        f"(relevant = grade >= {row['relevant_from']}), same grade on {row['exact']:.0%}"
        for row in summary["pairs"]
    ]


@label_app.command("serve")
@handles_errors
def serve_command(
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
