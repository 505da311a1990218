"""The `retbench` command: parse, call the library, render. No logic of its own.

Exit codes: 0 ok; 1 a gate failed; 2 usage or input error; 3 a backend failed.
Heavy libraries are imported inside commands so `retbench --help` starts fast.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from retbench.errors import EXIT_INPUT, RetbenchError
from retbench.secrets import redact

app = typer.Typer(
    name="retbench",
    help="A workbench for benchmarking retrievers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help text: rich's help rendering alone costs ~0.4 s per call
)
datasets_app = typer.Typer(help="Inspect datasets: shipped corpora or BEIR folders.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")
export_app = typer.Typer(help="Send a results directory to an experiment tracker.", no_args_is_help=True)
app.add_typer(export_app, name="export")

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = EXIT_INPUT) -> typer.Exit:
    """Print one clear line to stderr and return the Exit to raise."""
    typer.echo(f"error: {redact(message)}", err=True)
    return typer.Exit(code)


def handles_errors(func: F) -> F:
    """Turn library errors into one message and their exit code, never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RetbenchError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except FileNotFoundError as exc:
            raise fail(f"{exc.filename}: file not found") from None
        except OSError as exc:
            if exc.filename is None:  # a socket or process error is a backend's, not an input's
                raise
            raise fail(f"{exc.filename}: {_os_reason(exc)}") from None
        except UnicodeDecodeError as exc:
            raise fail(f"input is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except RecursionError:
            raise fail("input is nested too deeply to read") from None

    return wrapper  # type: ignore[return-value]


def _os_reason(exc: OSError) -> str:
    """What a file-system error means for the person who gave the path."""
    if isinstance(exc, IsADirectoryError):
        return "is a directory, expected a file"
    if isinstance(exc, NotADirectoryError):
        return "a part of this path is a file, expected a directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileExistsError):
        return "already exists and is not a directory"
    return exc.strerror or type(exc).__name__


def console() -> Any:
    """Rich console; when output is not a terminal (CI logs, files) tables get room instead of 80 columns."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


# -- datasets ---------------------------------------------------------------------------------
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
    dataset: Annotated[str, typer.Argument(help="A shipped dataset name (e.g. scifact) or a BEIR folder.")],
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


def _repair_journals(output: Path) -> None:
    """`--repair`: cut every journal under the output folder back to its last readable record."""
    from retbench.results.journal import repair_journal

    for journal in sorted(output.rglob("journal.jsonl")) if output.is_dir() else []:
        dropped = repair_journal(journal)
        if dropped:
            typer.echo(f"repaired {journal}: {dropped} line(s) set aside in {journal.name}.dropped", err=True)


# -- run --------------------------------------------------------------------------------------
@app.command("run")
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
) -> None:
    """Run every system on every dataset of an experiment; resumable (finished work is kept)."""
    from retbench.report.terminal import render_summary
    from retbench.studies.benchmark import load_config, raise_if_backend_failed, run_experiment

    cfg = load_config(config, output)
    if repair:
        _repair_journals(cfg.output)
    con = console()
    if quiet:
        outcome = run_experiment(
            cfg, force=force, log=lambda m: con.print(redact(m), soft_wrap=True, markup=False, highlight=False)
        )
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=con
        ) as bar:
            tasks: dict[str, Any] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(stage, total=total)
                bar.update(tasks[stage], completed=done, total=total)

            outcome = run_experiment(
                cfg,
                force=force,
                progress=progress,
                log=lambda m: bar.console.print(redact(m), soft_wrap=True, markup=False, highlight=False),
            )
    con.print(render_summary(outcome.metrics, cfg.metrics, title=f"{cfg.name}: {cfg.output}"))
    from retbench.report.leaderboard import build_leaderboard

    board = build_leaderboard(outcome.metrics, cfg.metrics[0])
    if board is not None:
        from retbench.report.terminal import render_leaderboard

        con.print(render_leaderboard(board))
    written = _write_reports(cfg.output)
    con.print(f"results: {cfg.output}  (metrics.json, manifest.json, {written}systems/<name>/run.trec)")
    if history:
        _register(cfg.output, cfg.raw.get("history"), tag, con)
    raise_if_backend_failed(outcome)


def _register(out: Path, configured: str | None, tag: str | None, con: Any) -> None:
    """Add the results to the history; a history that cannot be written costs a note, never the results."""
    import sqlite3

    from retbench.results.history import default_path, register

    where = default_path(configured)
    try:
        run_id = register(out, path=where, tag=tag)
    except (sqlite3.Error, OSError) as exc:
        typer.echo(f"note: not added to the history {where}: {exc}", err=True)
        return
    con.print(f"history: run {run_id} in {where}", soft_wrap=True, markup=False, highlight=False)


def _write_reports(out: Path) -> str:
    """report.md and report.html beside the results (skipped, with a note, when a system left no scores)."""
    from retbench.report.html import render_html
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report

    try:
        data = build_report(out)
    except (RetbenchError, OSError) as exc:  # e.g. a system whose backend failed while indexing has no table
        typer.echo(f"note: no report written ({exc}); see metrics.json", err=True)
        return ""
    _write(out / "report.md", report_markdown(data))
    _write(out / "report.html", render_html(data))
    return "report.md, report.html, "


# -- stress -----------------------------------------------------------------------------------
@app.command("stress")
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
) -> None:
    """Drive one system under load (and faults); exit 3 when failures exceed the allowed rate."""
    from retbench.report.stress import describe_failure, headline
    from retbench.studies.stress import load_config, run_stress

    cfg = load_config(config, output)
    if repair:
        _repair_journals(cfg.output)
    result = run_stress(cfg, fresh=fresh, echo=lambda m: typer.echo(redact(m)))
    typer.echo(f"{headline(result.summary)}; report: {result.out_dir / 'report.md'}")
    if result.exit_code:
        first = result.first_failure
        raise fail(
            f"backend failed: {describe_failure(first) if first else 'failure rate over the allowed rate'}",
            result.exit_code,
        )


# -- chunking -----------------------------------------------------------------------------------
@app.command("chunking")
@handles_errors
def chunking_command(
    config: Annotated[Path, typer.Argument(help="Chunking YAML: chunking set, chunkers, systems, budgets.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Results directory (overrides the config).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Redo (chunker, system) pairs that finished earlier.")] = False,
) -> None:
    """Compare chunkers x retrievers with span relevance; writes a results directory and report.md."""
    from rich.markdown import Markdown

    from retbench.studies.benchmark import raise_if_backend_failed
    from retbench.studies.chunking import load_config, run_chunking

    cfg = load_config(config, output)
    con = console()
    outcome = run_chunking(cfg, force=force, log=lambda m: con.print(m))
    con.print(Markdown((cfg.output / "report.md").read_text()))
    con.print(f"results: {cfg.output}  (report.md, metrics.json, manifest.json, systems/<chunker>+<system>/)")
    raise_if_backend_failed(outcome)  # type: ignore[arg-type]


# -- compare / gate / report ----------------------------------------------------------------------
def _names(text: str | None) -> list[str] | None:
    """'a, b' -> ['a', 'b'] (None when not given)."""
    return [s.strip() for s in text.split(",") if s.strip()] if text else None


def _write(path: Path | None, text: str) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _check_same_data(allowed: bool, *loaded: Any) -> None:
    """Refuse results computed on different data unless --allow-different-data says so (then say it)."""
    from retbench.compare import different_data

    why = different_data(*loaded)
    if why is None:
        return
    if not allowed:
        raise fail(f"results were computed on different data ({why}); pass --allow-different-data to go on anyway")
    typer.echo(f"note: --allow-different-data: results were computed on different data ({why})", err=True)


@app.command("compare")
@handles_errors
def compare_command(
    inputs: Annotated[
        list[Path], typer.Argument(help="Results directories and/or TREC run files (run files need --qrels).")
    ],
    qrels: Annotated[Path | None, typer.Option(help="Qrels for run files (TREC, or BEIR .tsv).")] = None,
    queries: Annotated[
        Path | None, typer.Option(help="BEIR queries.jsonl: query texts (and tags) for run files.")
    ] = None,
    metrics: Annotated[
        str | None, typer.Option(help="Comma-separated metrics (default: all the inputs share).")
    ] = None,
    systems: Annotated[
        str | None, typer.Option(help="Comma-separated systems to take from results directories.")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="Compare every system against this one (default: all pairs).")
    ] = None,
    resamples: Annotated[int, typer.Option(help="Randomization and bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed of the resampling (results are reproducible under it).")] = 0,
    top: Annotated[int, typer.Option(help="Most changed queries to list per metric.")] = 5,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full comparison as JSON.")] = None,
    markdown_out: Annotated[Path | None, typer.Option("--markdown", help="Write the comparison as Markdown.")] = None,
    allow_different_data: Annotated[
        bool, typer.Option(help="Compare results computed on different corpora or qrels (printed as a note).")
    ] = False,
) -> None:
    """Paired A/B comparison: deltas with bootstrap CIs, randomization/t/Wilcoxon p-values, Holm-corrected."""
    import json

    from retbench.compare import canonical_metrics, compare, load_systems
    from retbench.report.markdown import comparison_markdown

    if resamples < 1:
        raise fail("--resamples must be at least 1")
    loaded = load_systems(inputs, qrels=qrels, metrics=_names(metrics), queries=queries, systems=_names(systems))
    _check_same_data(allow_different_data, loaded)
    cmp = compare(
        loaded.evaluations,
        loaded.default_pairs(baseline),
        canonical_metrics(_names(metrics)),
        queries=loaded.queries,
        n_resamples=resamples,
        seed=seed,
        top=top,
    )
    text = comparison_markdown(cmp)
    typer.echo(text)
    _write(markdown_out, text)
    _write(json_out, json.dumps(cmp.to_dict(), indent=2, allow_nan=False) + "\n")


@app.command("gate")
@handles_errors
def gate_command(
    criteria: Annotated[
        Path, typer.Option(help="Ship criteria YAML (gates: name, metric, threshold, regression_max, severity).")
    ],
    candidate: Annotated[Path, typer.Option(help="Candidate: a results directory or a TREC run file.")],
    baseline: Annotated[
        str | None,
        typer.Option(
            help="Baseline: a results directory, a TREC run file, or history:last-pass / history:<tag> / history:<id>."
        ),
    ] = None,
    candidate_system: Annotated[
        str | None, typer.Option(help="System to gate when the candidate holds several.")
    ] = None,
    baseline_system: Annotated[
        str | None, typer.Option(help="System to compare against when the baseline holds several.")
    ] = None,
    qrels: Annotated[Path | None, typer.Option(help="Qrels for run files (TREC, or BEIR .tsv).")] = None,
    queries: Annotated[
        Path | None, typer.Option(help="BEIR queries.jsonl whose metadata tags/category give tag breakdowns.")
    ] = None,
    comment: Annotated[Path | None, typer.Option(help="Write the Markdown PR comment here.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the machine-readable verdict here.")] = None,
    resamples: Annotated[int, typer.Option(help="Randomization test resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed of the randomization test.")] = 0,
    history_file: Annotated[
        Path | None, typer.Option(help="History database (default: $RETBENCH_HISTORY or the per-user one).")
    ] = None,
    allow_different_data: Annotated[
        bool, typer.Option(help="Gate on a baseline computed on other corpora or qrels (printed as a note).")
    ] = False,
) -> None:
    """Apply ship criteria. Exit 0 pass (warnings print), 1 an error gate failed, 2 bad criteria, 3 backend failures.

    A candidate results directory registered in the history gets the verdict recorded (history:last-pass).
    """
    import json

    from retbench.compare import load_history, load_systems
    from retbench.gates import load_criteria, run_gates
    from retbench.report.gate_comment import gate_json, render_comment, sentence
    from retbench.results import history

    crit = load_criteria(criteria)
    metrics = list(dict.fromkeys(g.metric for g in crit.gates))
    cand = load_systems([candidate], qrels=qrels, metrics=metrics, queries=queries, check_metrics=False)
    base = None
    if baseline is not None and baseline.startswith("history:"):
        base, entry = load_history(baseline, history_file)
        typer.echo(
            f"baseline: history run {entry.id} of {entry.created} (commit {entry.git_commit or 'none'})", err=True
        )
    elif baseline is not None:
        base = load_systems([Path(baseline)], qrels=qrels, metrics=metrics, check_metrics=False)
    _check_same_data(allow_different_data, cand, *([base] if base is not None else []))
    cand_ev = cand.one(candidate_system, "candidate")
    base_ev = base.one(baseline_system, "baseline") if base is not None else None
    report = run_gates(
        crit,
        cand_ev,
        base_ev,
        groups=cand.groups,
        failures=cand.failures.get(cand_ev.system),
        n_resamples=resamples,
        seed=seed,
    )
    text = render_comment(report)
    typer.echo(text)
    _write(comment, text)
    _write(json_out, json.dumps(gate_json(report), indent=2, allow_nan=False) + "\n")
    if candidate.is_dir():
        history.record_gate(candidate, report.exit_code == 0, path=history_file)
    if report.exit_code:
        why = (
            f"the candidate recorded {len(report.failures)} backend failure(s)"
            if report.backend_failed
            else "; ".join(sentence(r) for r in report.results if r.blocks)
        )
        raise fail(f"gate failed: {why}", report.exit_code)


@app.command("report")
@handles_errors
def report_command(
    results: Annotated[Path, typer.Argument(help="A results directory (from `retbench run`).")],
    html: Annotated[
        Path | None, typer.Option(help="Write one self-contained HTML file (tables and SVG plots, opens offline).")
    ] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write the report as Markdown.")] = None,
    baseline: Annotated[
        str | None, typer.Option(help="System the others are compared with (default: the first).")
    ] = None,
    primary: Annotated[
        str | None, typer.Option(help="Metric of the per-query delta plots (default: the first).")
    ] = None,
    resamples: Annotated[int, typer.Option(help="Randomization and bootstrap resamples of the comparisons.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed of the resampling.")] = 0,
) -> None:
    """Report a results directory: HTML (tables, metric@k curves, deltas, latency, coverage) and/or Markdown."""
    from retbench.report.html import render_html
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report

    data = build_report(results, baseline=baseline, primary=primary, n_resamples=resamples, seed=seed)
    text = report_markdown(data)
    _write(markdown, text)
    _write(html, render_html(data))
    if html is None and markdown is None:
        typer.echo(text)
    for path in (html, markdown):
        if path is not None:
            typer.echo(f"wrote {path}")


@app.command("history")
@handles_errors
def history_command(
    system: Annotated[str | None, typer.Option(help="Only this system.")] = None,
    metric: Annotated[str | None, typer.Option(help="Metric to follow (default: the latest run's first).")] = None,
    limit: Annotated[int, typer.Option(help="The most recent runs to show.")] = 20,
    html: Annotated[Path | None, typer.Option(help="Also write the trend as one HTML file with a chart.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the entries as JSON.")] = False,
    history_file: Annotated[
        Path | None, typer.Option(help="History database (default: $RETBENCH_HISTORY or the per-user one).")
    ] = None,
) -> None:
    """The trend of a metric over registered runs: means with CIs, commit, tag and gate verdict per run."""
    import json
    from dataclasses import asdict

    from retbench.compare import canonical_metrics
    from retbench.report.history import render_trend, trend_html
    from retbench.results.history import entries

    metric = (canonical_metrics([metric]) or [metric])[0] if metric else None
    rows = entries(history_file, system=system, metric=metric, limit=limit)
    if as_json:
        typer.echo(json.dumps([asdict(e) for e in rows], indent=2, default=str))
        return
    if metric is None:
        latest = next((e for e in reversed(rows) if e.scores), None)
        metric = next(iter(next(iter(latest.scores.values())))) if latest else "ndcg@10"
    console().print(render_trend(rows, metric))
    if html is not None:
        _write(html, trend_html(rows, metric))
        typer.echo(f"wrote {html}")


@export_app.command("mlflow")
@handles_errors
def export_mlflow_command(
    results: Annotated[Path, typer.Argument(help="A results directory (from `retbench run`).")],
    tracking_uri: Annotated[
        str | None, typer.Option(help="MLflow tracking URI (default: MLFLOW_TRACKING_URI or MLflow's own default).")
    ] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment (default: the experiment's name).")] = None,
    artifact_location: Annotated[
        str | None, typer.Option(help="Artifact location when the MLflow experiment is created here.")
    ] = None,
) -> None:
    """Log params (config, fingerprints, versions), metrics (means, CI bounds, coverage) and artifacts to MLflow."""
    from retbench.results.mlflow_export import export_mlflow

    out = export_mlflow(results, tracking_uri=tracking_uri, experiment=experiment, artifact_location=artifact_location)
    typer.echo(f"logged to MLflow experiment {out['experiment_id']}: parent run {out['parent_run_id']}")
    for system, run_id in out["runs"].items():
        typer.echo(f"  {system}: run {run_id}")


# -- end of compare / gate / report -------------------------------------------------------------


# -- serve --------------------------------------------------------------------------------------
def _json_object(text: str, option: str) -> dict[str, Any]:
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{option} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise fail(f"{option} must be a JSON object")
    return value


@app.command("serve")
@handles_errors
def serve_command(
    dataset: Annotated[
        str | None,
        typer.Argument(help="Corpus to index: a shipped dataset name (e.g. scifact) or a BEIR folder."),
    ] = None,
    adapter: Annotated[str, typer.Option(help="Retriever adapter (a built-in name or module:factory).")] = "bm25s",
    params: Annotated[str, typer.Option(help="Adapter parameters as a JSON object.")] = "{}",
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one; the URL is printed).")] = 8000,
    include_text: Annotated[bool, typer.Option(help="Return each document's text with its id and score.")] = False,
    verbose: Annotated[bool, typer.Option(help="Log every request.")] = False,
    backlog: Annotated[
        int, typer.Option(help="Listen backlog: connections queued while all threads are busy (>= your concurrency).")
    ] = 1024,
    timeout: Annotated[float, typer.Option(help="Seconds a connection may stay silent before it is closed.")] = 30.0,
    rerank: Annotated[
        str | None,
        typer.Option(help="Also serve a reranker at /rerank: cross_encoder, bi_encoder, http or module:factory."),
    ] = None,
    rerank_params: Annotated[str, typer.Option(help="Reranker parameters as a JSON object.")] = "{}",
) -> None:
    """Serve a retriever over HTTP: POST /search {"query", "k"} -> {"retrieved": [{"id", "score"}]};
    with --rerank (and no dataset, if you like) also POST /rerank {"query", "documents", "top_n"}."""
    from retbench.serve import RetrievalServer, serve_dataset

    options, rr_options = _json_object(params, "--params"), _json_object(rerank_params, "--rerank-params")
    if dataset is None and rerank is None:
        raise fail("give a dataset to serve /search, --rerank to serve /rerank, or both")
    reranker = None
    if rerank is not None:
        from retbench.retrievers.rerank import create_reranker

        reranker = create_reranker(rerank, rr_options, where="--rerank-params")
    if backlog < 1 or not timeout > 0:
        raise fail("--backlog must be at least 1 and --timeout positive")
    if dataset is not None:
        server = serve_dataset(
            dataset,
            adapter,
            options,
            host=host,
            port=port,
            include_text=include_text,
            verbose=verbose,
            backlog=backlog,
            timeout=timeout,
        )
        server.reranker = reranker
        typer.echo(f"serving {adapter} over {dataset} at {server.url}", err=False)
    else:
        server = RetrievalServer(
            reranker=reranker, host=host, port=port, verbose=verbose, backlog=backlog, timeout=timeout
        )
    if reranker is not None:
        typer.echo(f"serving reranker {rerank} at {server.rerank_url}", err=False)
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        server.stop()


# -- ingest-impact ------------------------------------------------------------------------------
@app.command("ingest-impact")
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
    outcome = run_ingest(cfg, log=lambda m: con.print(m))
    if "alone" in outcome.results:
        header, rows = impact_rows(outcome.results["alone"][:top], outcome.metrics, cfg.gain.recall, compact=True)
        table = Table(
            *header, title=f"{cfg.name}: candidates ranked by gain (top {min(top, len(outcome.results['alone']))})"
        )
        for r in rows:
            table.add_row(*r)
        con.print(table)
    con.print(f"results: {cfg.output}  (report.md, candidates.json, summary.json, manifest.json)")


# -- eval ---------------------------------------------------------------------------------------
@app.command("eval")
@handles_errors
def eval_command(
    qrels: Annotated[
        Path, typer.Argument(help="Judgements: TREC qrels, BEIR qrels .tsv or folder, or a golden set (.yaml/.jsonl).")
    ],
    run: Annotated[
        Path, typer.Argument(help="A TREC run file, or system outputs (.jsonl/.json/.yaml) for a golden set.")
    ],
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            "-m",
            help="A metric (repeatable): ndcg@10, P@5, recall@100, mrr, map, rprec, hit@5, recall@5(rel=2), or trec_eval names (ndcg_cut_10, P.5,10, recip_rank).",
        ),
    ] = None,
    per_query: Annotated[bool, typer.Option("--per-query", "-q", help="Also print one line per query.")] = False,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="table, json, or trec (trec_eval's own three columns).")
    ] = "table",
    relevance_level: Annotated[
        int, typer.Option("--relevance-level", "-l", help="Lowest grade that counts as relevant (binary measures).")
    ] = 1,
    no_relevant: Annotated[
        str, typer.Option(help="Judged queries with no relevant doc: skip (reported), zero, or one.")
    ] = "skip",
    mode: Annotated[
        str,
        typer.Option(help="trec_eval (all judged queries, unanswered = 0) or pytrec_eval (answered only, as BEIR)."),
    ] = "trec_eval",
    default_k: Annotated[
        int, typer.Option(help="Cutoff for metrics given without one (a sample's metadata.k wins).")
    ] = 5,
    split: Annotated[str, typer.Option(help="Qrels split when QRELS is a BEIR folder.")] = "test",
    tsv: Annotated[
        Path | None, typer.Option(help="Write the per-query table (query_id, status, metrics) here.")
    ] = None,
    ci: Annotated[bool, typer.Option(help="Bootstrap 95% confidence intervals in table and json output.")] = True,
    llm_qrels: Annotated[
        Path | None, typer.Option(help="LLM qrels written by judge-relevance (llm_qrels.txt).")
    ] = None,
    labels: Annotated[
        str, typer.Option(help="Which labels score: human, llm, or human+llm (a human label always wins).")
    ] = "human",
) -> None:
    """Score a run against judgements, like trec_eval (-c): every judged query counts, unanswered ones as 0."""
    import json

    from retbench.evaluation import evaluate, groups_from_samples, json_safe, read_judgements, read_system
    from retbench.report.trec import trec_lines

    if fmt not in ("table", "json", "trec"):
        raise fail(f"--format must be table, json or trec, got {fmt!r}")
    judged, samples = read_judgements(qrels, split)
    if llm_qrels is not None or labels != "human":
        from retbench.data.qrels import Qrels
        from retbench.io.trec import read_qrels
        from retbench.studies.labels.relevance import combine_labels

        judged = combine_labels(labels, Qrels(judged), read_qrels(llm_qrels) if llm_qrels else None)
    system, texts = read_system(run)
    if metric:
        names = list(metric)
    elif samples is not None:
        names = ["retrieval-hit-at-k", "retrieval-recall-at-k", "retrieval-mrr", "retrieval-ndcg-at-k"]
        if texts and all(s.answer for s in samples):
            names.append("answer-containment-at-k")
    else:
        names = ["ndcg@10", "recall@100", "map", "mrr", "P@10"]
    ev = evaluate(
        system,
        judged,
        names,
        relevance_level=relevance_level,
        no_relevant=no_relevant,
        mode=mode,
        default_k=default_k,
        samples=samples,
        texts=texts or None,
    )
    if tsv is not None:
        ev.to_tsv(tsv)
    notes = [f"labels: {labels}" + (f" (LLM labels from {llm_qrels})" if labels != "human" else "")]
    counts = ev.status_counts()
    unanswered = {s: c for s, c in counts.items() if s not in ("ok", "empty") and c}
    if unanswered:
        notes.append("unanswered judged queries scored 0: " + ", ".join(f"{c} {s}" for s, c in unanswered.items()))
    if ev.excluded:
        notes.append(f"{len(ev.excluded)} unanswered judged queries not counted ({ev.mode} mode)")
    if ev.skipped:
        notes.append(
            f"{len(ev.skipped)} judged queries with no relevant document skipped (--no-relevant zero counts them, as trec_eval does)"
        )
    if ev.n_duplicates:
        notes.append(f"{ev.n_duplicates} duplicate doc ids dropped from rankings (first kept)")
    if ev.unjudged:
        notes.append(f"{len(ev.unjudged)} answered queries have no judgements (ignored)")
    if fmt == "trec":
        for line in trec_lines(ev, per_query=per_query):
            typer.echo(line)
        for note in [f"mode: {ev.label}", *notes]:
            typer.echo(f"# {note}", err=True)
        return
    if fmt == "json":
        out = ev.to_dict(per_query=per_query, ci=ci)
        out["labels"] = labels
        if samples is not None:
            groups = groups_from_samples(samples)
            if groups:
                out["breakdown"] = ev.breakdown(groups)
                out["group_sizes"] = ev.group_sizes(groups)
        typer.echo(json.dumps(json_safe(out), indent=2, allow_nan=False))
        return
    from rich.table import Table

    con = console()
    agg = ev.aggregate(ci=ci)
    table = Table(
        "metric",
        "mean",
        *(["95% CI"] if ci else []),
        "n",
        title=f"{ev.system}: {len(ev.query_ids)} queries, mode {ev.label}",
    )
    for m, a in agg.items():
        table.add_row(m, f"{a['mean']:.4f}", *([f"[{a['ci_low']:.4f}, {a['ci_high']:.4f}]"] if ci else []), str(a["n"]))
    con.print(table)
    if samples is not None:
        groups = groups_from_samples(samples)
        if groups:
            sizes = ev.group_sizes(groups)
            bd = Table("group", "n", *ev.metrics, title="breakdown by tag / category")
            for tag, means in ev.breakdown(groups).items():
                bd.add_row(tag, str(sizes[tag]), *(f"{v:.4f}" for v in means.values()))
            con.print(bd)
    if per_query:
        pq = Table("query", "status", *ev.metrics)
        for row in ev.per_query():
            pq.add_row(row["query_id"], row["status"], *(f"{row[m]:.4f}" for m in ev.metrics))
        con.print(pq)
    for note in notes:
        con.print(f"note: {note}", markup=False, highlight=False)


from retbench import cli_llm  # noqa: E402, F401  (registers judge-relevance, judge-calibrate, synth)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
