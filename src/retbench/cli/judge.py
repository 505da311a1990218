"""`retbench judge-relevance`, `judge-calibrate` and `synth`: the commands that call an LLM judge.

Every judge command prints its plan (calls, estimated tokens and cost) before the first call, and
what it spent after the last (calls made, tokens).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from retbench.cli.app import fail, handles_errors
from retbench.errors import EXIT_BACKEND
from retbench.io.files import write_json
from retbench.secrets import redact

if TYPE_CHECKING:
    from retbench.data.qrels import Qrels
    from retbench.data.run import Run
    from retbench.llm.settings import JudgeSettings


def _exit_if_judge_failed(statuses: dict[str, int]) -> None:
    """Calls that failed, or replies none of which could be read, make the command exit 3, after its files are
    written (some unparseable replies beside readable ones are counted in "judged N of M", not an exit)."""
    total, unreadable = sum(statuses.values()), statuses.get("unparseable", 0)
    if unreadable and unreadable == total:
        raise fail(
            f"no judge reply gave a verdict: {unreadable} of {total} replies unparseable (see the call log)",
            EXIT_BACKEND,
        )
    failed = {s: c for s, c in statuses.items() if s in ("judge_error", "judge_timeout") and c}
    if failed:
        raise fail(
            "judge calls failed: " + ", ".join(f"{c} {s}" for s, c in failed.items()) + " (see the call log)",
            EXIT_BACKEND,
        )


def _require_positive(**options: int | None) -> None:
    """Counts a person typed (`--max-queries 5`) must be positive: a negative one would slice from the end
    (`--max-queries -1`: every query but the last, each a paid call). None means "not given"."""
    for name, value in options.items():
        if value is not None and value < 1:
            raise fail(f"--{name.replace('_', '-')} must be a positive integer, got {value}")


def _judge_settings(path: Path) -> tuple[JudgeSettings, Any]:
    """The `judge:` block of a YAML file (an experiment config or a file holding only that block)."""
    from retbench.config.judge import load_judge

    return load_judge(path)


@handles_errors
def judge_relevance(
    runs: Annotated[list[Path], typer.Argument(help="A results directory (systems/*/run.trec) or TREC run files.")],
    judge: Annotated[Path, typer.Option("--judge", help="A YAML file with a judge: block.")],
    depth: Annotated[int, typer.Option(help="Pool the top k of every system.")] = 10,
    dataset: Annotated[
        str | None, typer.Option(help="Dataset (shipped name or BEIR folder); default: the results' manifest.")
    ] = None,
    split: Annotated[
        str | None, typer.Option(help="Human qrels split (default: the results' manifest, else test).")
    ] = None,
    max_queries: Annotated[int | None, typer.Option(help="Only the first N judged queries (a quick look).")] = None,
    output: Annotated[
        Path | None, typer.Option(help="Where llm_qrels.txt goes (default RESULTS_DIR/labels or ./labels).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (calls, tokens, cost) and stop.")] = False,
    max_chars: Annotated[int, typer.Option(help="Passages are cut to this many characters.")] = 2000,
) -> None:
    """Judge every pooled (query, document) pair the human qrels leave unjudged; write LLM qrels with provenance."""
    _require_positive(depth=depth, max_queries=max_queries, max_chars=max_chars)
    from retbench.io.datasets import load_dataset
    from retbench.llm.judge import Judge, open_base_url
    from retbench.report.judge import estimate_line, identity_line, judged_line, stats_line
    from retbench.studies.labels import relevance as rl

    settings, _ = _judge_settings(judge)
    found, results_dir = rl.find_runs(runs)
    recorded, recorded_split = rl.dataset_of(results_dir)
    split = split or recorded_split or "test"
    ds = load_dataset(dataset or recorded or "scifact", [split])
    human = ds.split(split)
    qids = [q for q in human if q in ds.queries][: max_queries or None]
    pairs = rl.unjudged_pairs(rl.pool(found, depth, qids), human)
    out = output or ((results_dir / "labels") if results_dir else Path("labels"))
    with open_base_url(settings) as url:
        j = Judge(settings, base_url=url, log_path=out / rl.CALLS_FILE)
        typer.echo(identity_line(j.identity.to_dict()))
        typer.echo(
            f"pool: {len(found)} systems x top {depth} over {len(qids)} queries; {len(pairs)} pairs without a human label"
        )
        typer.echo(estimate_line(j.estimate(rl.judge_items(pairs, ds.queries, ds.corpus, max_chars))))
        if dry_run:
            return
        labels = rl.label_pairs(
            j,
            pairs,
            ds.queries,
            ds.corpus,
            out,
            max_chars=max_chars,
            context={
                "depth": depth,
                "systems": [r.name for r in found],
                "dataset": ds.name,
                "split": split,
                "queries": len(qids),
            },
        )
    typer.echo(judged_line(labels.statuses) + f" -> {out / rl.QRELS_FILE}")
    typer.echo(stats_line(labels.provenance["judge"]["stats"]))
    summary = _score_by_label_source(found, human.subset(qids), labels.qrels, depth)
    write_json(out / "metrics.json", summary)
    _exit_if_judge_failed(labels.statuses)


def _score_by_label_source(runs: list[Run], human: Qrels, llm: Qrels, depth: int) -> dict[str, Any]:
    """nDCG, judged and holes at the pool depth of every run under human, LLM and combined labels (printed too).

    A mean over no query (no query has a relevant label of that source, e.g. every LLM call failed) is
    missing: null in metrics.json with the reason, "n/a" on screen, never 0 and never NaN.
    """
    from retbench.evaluation import evaluate
    from retbench.io.judgements import LABEL_SOURCES, combine_labels
    from retbench.report.fmt import num

    metrics = [f"ndcg@{depth}", f"judged@{depth}", f"holes@{depth}"]
    summary: dict[str, Any] = {}
    for source in LABEL_SOURCES:
        qrels = combine_labels(source, human, llm)
        for run in runs:
            agg = evaluate(run, qrels, metrics).aggregate(ci=False)
            row: dict[str, Any] = {m: None if agg[m]["mean"] != agg[m]["mean"] else agg[m]["mean"] for m in metrics}
            if all(v is None for v in row.values()):
                row["missing"] = f"no query has a relevant label under {source} labels"
            summary.setdefault(run.name, {})[source] = row
            typer.echo(f"{run.name:>16}  labels {source:<9}  " + "  ".join(f"{m} {num(row[m])}" for m in metrics))
    return summary


@handles_errors
def judge_calibrate(
    config: Annotated[Path, typer.Argument(help="A calibration config (see configs/judge-calibration.yaml).")],
    output: Annotated[Path | None, typer.Option(help="Results folder (default: the config's output).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (calls, tokens, cost) and stop.")] = False,
) -> None:
    """Agreement of the judge with human labels (accuracy, Cohen's kappa, confusion, CIs) and a reliability spot-check."""
    from retbench.jsontypes import as_object
    from retbench.report.judge import calibration_lines, estimate_line, identity_line, stats_line
    from retbench.results.calibration import CalibrationResult
    from retbench.studies.labels.calibrate import load_calibration, run_calibration

    cfg = load_calibration(config, output)
    result = run_calibration(cfg, dry_run=dry_run, echo=typer.echo)
    if not isinstance(result, CalibrationResult):  # rubric metrics: stored verdicts against people's, no call made
        from retbench.report.judge import rubric_calibration_lines

        for line in rubric_calibration_lines(result):
            typer.echo(line)
        typer.echo(f"written: {cfg.output_dir / 'metrics.json'}")
        return
    typer.echo(identity_line(as_object(result.judge.get("identity"))))
    if result.estimate is not None:  # a dry run: the plan, and no call made
        typer.echo(estimate_line(result.estimate))
        return
    for line in calibration_lines(result):
        typer.echo(line)
    typer.echo(stats_line(as_object(result.judge.get("stats"))))
    typer.echo(f"written: {cfg.output_dir / 'metrics.json'}")
    _exit_if_judge_failed(result.statuses)


@handles_errors
def synth(
    corpus: Annotated[
        str, typer.Argument(help="A dataset (shipped name or BEIR folder) whose documents get questions.")
    ],
    judge: Annotated[
        Path, typer.Option("--judge", help="A YAML file with a judge: block (the model that writes questions).")
    ],
    n: Annotated[int, typer.Option("--n", help="Documents to sample.")] = 10,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    output: Annotated[Path, typer.Option(help="The golden set to write (JSONL).")] = Path("synthetic.jsonl"),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (calls, tokens, cost) and stop.")] = False,
    max_chars: Annotated[int, typer.Option(help="Documents are cut to this many characters.")] = 1500,
    prompt: Annotated[str, typer.Option(help="A shipped prompt id or your own <name>_v<N>.txt.")] = "synth_v1",
) -> None:
    """Questions per sampled document, with the source span, as a golden set for human review."""
    _require_positive(n=n, max_chars=max_chars)
    from retbench.io.datasets import load_dataset
    from retbench.llm.judge import Judge, open_base_url
    from retbench.report.judge import estimate_line, identity_line, judged_line, stats_line
    from retbench.studies.labels import synth as sy

    settings, _ = _judge_settings(judge)
    ds = load_dataset(corpus)
    with open_base_url(settings) as url:
        j = Judge(settings, prompt, base_url=url, log_path=output.with_suffix(".calls.jsonl"), parse=sy.parse_question)
        typer.echo(identity_line(j.identity.to_dict()))
        docs = sy.sample_documents(ds.corpus, n, seed, keep=sy.reviewed_documents(output))
        typer.echo(estimate_line(j.estimate(sy.synth_items(ds.corpus, docs, max_chars))))
        if dry_run:
            return
        result = sy.synthesize(j, ds.corpus, docs, output, max_chars=max_chars)
    typer.echo(
        judged_line(result["statuses"]) + f" -> {output} ({result['kept_reviewed']} reviewed samples kept as they were)"
    )
    for row in result["questions"]:
        typer.echo(redact(f"  {row['id']}: overlap {row['overlap']:.2f}  {row['question']}"))  # model text
    typer.echo(
        f"mean lexical overlap {result['mean_overlap']:.2f} (share of the question's stemmed words found in its document; high values favour BM25)"
    )
    typer.echo(stats_line(j.stats.to_dict(settings)))
    _exit_if_judge_failed(result["statuses"])
