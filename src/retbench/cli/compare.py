"""`retbench compare`, `gate` and `report`: paired comparisons, ship criteria, and report files."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from retbench.cli.app import fail, handles_errors, names, stage_bars, write

if TYPE_CHECKING:
    from retbench.inputs import Loaded, Side


def _check_same_data(allowed: bool, *loaded: Loaded) -> None:
    """Refuse results computed on different data unless --allow-different-data says so (then say it)."""
    from retbench.inputs import different_data

    why = different_data(*loaded)
    if why is None:
        return
    if not allowed:
        raise fail(f"results were computed on different data ({why}); pass --allow-different-data to go on anyway")
    typer.echo(f"note: --allow-different-data: results were computed on different data ({why})", err=True)


def _check_same_settings(allowed: bool, pairs: list[tuple[Side, Side]], metrics: list[str] | None) -> None:
    """Say how the compared sides differ in depth, relevance level or counting; refuse what cannot be
    compared (see `inputs.different_settings`) unless --allow-different-settings says so."""
    from retbench.inputs import different_settings

    notes, refusals = different_settings(pairs, metrics)
    for line in notes:
        typer.echo(f"note: results differ in {line}", err=True)
    if not refusals:
        return
    why = "; ".join(refusals)
    if not allowed:
        raise fail(
            f"results were computed with different settings ({why}), so their numbers are not comparable; "
            "rerun one side with the other's settings, or pass --allow-different-settings to go on anyway"
        )
    typer.echo(f"note: --allow-different-settings: results were computed with different settings ({why})", err=True)


_ALLOW_SETTINGS_HELP = (
    "Go on when the sides differ in depth (below a compared cutoff), relevance level or no-relevant policy "
    "(printed as a note)."
)


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
        str | None,
        typer.Option(
            "--metrics",
            "--metric",
            help="Comma-separated metrics to test (default: the config's primary: list, else its first metric; "
            "'all': every metric the inputs share).",
        ),
    ] = None,
    systems: Annotated[
        str | None, typer.Option(help="Comma-separated systems to take from results directories.")
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(help="Compare every system against this one (default: the config's baseline:, else the first)."),
    ] = None,
    all_pairs: Annotated[
        bool, typer.Option("--all-pairs", help="Test every pair of systems, not each against the baseline.")
    ] = False,
    resamples: Annotated[
        int | None,
        typer.Option(
            help="Randomization and bootstrap resamples (default: enough for Holm over the tests made, "
            "at least 10,000)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the resampling (results are reproducible under it).")] = 0,
    top: Annotated[int, typer.Option(help="Most changed queries to list per metric.")] = 5,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full comparison as JSON.")] = None,
    markdown_out: Annotated[Path | None, typer.Option("--markdown", help="Write the comparison as Markdown.")] = None,
    allow_different_data: Annotated[
        bool, typer.Option(help="Compare results computed on different corpora or qrels (printed as a note).")
    ] = False,
    allow_different_settings: Annotated[bool, typer.Option(help=_ALLOW_SETTINGS_HELP)] = False,
) -> None:
    """Paired A/B comparison: deltas with bootstrap CIs, randomization/t/Wilcoxon p-values, Holm-corrected.

    By default each system against the baseline on the primary metrics; --all-pairs and --metrics all widen it.
    """
    import json

    from retbench.comparison import compare
    from retbench.inputs import canonical_metrics, load_systems, primary_metrics
    from retbench.report.markdown import comparison_markdown

    if resamples is not None and resamples < 1:
        raise fail("--resamples must be at least 1")
    every_metric = names(metrics) == ["all"]
    asked = None if every_metric else names(metrics)
    loaded = load_systems(inputs, qrels=qrels, metrics=asked, queries=queries, systems=names(systems))
    _check_same_data(allow_different_data, loaded)
    config = _first_config(inputs)
    pairs = loaded.default_pairs(baseline, every_pair=all_pairs, config=config)
    in_pairs = {s for p in pairs for s in p}
    shared = [
        m
        for m in loaded.evaluations[0].metrics
        if all(m in e.metrics for e in loaded.evaluations if e.system in in_pairs)
    ]
    tested = shared if every_metric else canonical_metrics(asked) or primary_metrics(config, shared)
    sides = [((a, a, loaded), (b, b, loaded)) for a, b in pairs]
    _check_same_settings(allow_different_settings, sides, tested)
    with _progress(len(pairs) * len(tested)) as progress:
        cmp = compare(
            loaded.evaluations,
            pairs,
            tested,
            queries=loaded.queries,
            n_resamples=resamples,
            seed=seed,
            top=top,
            progress=progress,
        )
    if cmp.note:
        typer.echo(f"note: {cmp.note}", err=True)
    # the heading suggests widening the comparison only while neither widening option was given
    text = comparison_markdown(cmp, options=not (all_pairs or every_metric))
    typer.echo(text)
    write(markdown_out, text)
    write(json_out, json.dumps(cmp.to_dict(), indent=2, allow_nan=False) + "\n")


# from this many tests on, the resampling's progress is shown on stderr
_PROGRESS_FROM = 10


@contextmanager
def _progress(tests: int) -> Iterator[Callable[[str, int, int], None] | None]:
    """A progress bar on stderr, one line per resampling stage, for comparisons of many tests (on a
    terminal it redraws; piped, rich prints it once when done)."""
    if tests < _PROGRESS_FROM:
        yield None
        return
    from rich.console import Console

    err = Console(stderr=True)
    err.print(f"comparing: {tests} tests", highlight=False)
    with stage_bars(err, " (resample blocks)") as step:
        yield step


def _first_config(inputs: list[Path]) -> dict[str, Any]:
    """The experiment config of the first results directory given (its baseline: and primary: keys), if any."""
    from retbench.results import load_results
    from retbench.results.read import config_from_manifest

    for p in inputs:
        if p.is_dir():
            return config_from_manifest(load_results(p).manifest)
    return {}


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
    allow_different_settings: Annotated[bool, typer.Option(help=_ALLOW_SETTINGS_HELP)] = False,
) -> None:
    """Apply ship criteria. Exit 0 pass (warnings print), 1 an error gate failed, 2 bad criteria, 3 backend failures.

    A candidate results directory registered in the history gets the verdict recorded (history:last-pass).
    """
    import json

    from retbench.criteria import load_criteria
    from retbench.gates import run_gates
    from retbench.inputs import load_systems
    from retbench.report.gate_comment import gate_json, render_comment, sentence
    from retbench.results import history

    crit = load_criteria(criteria)
    metrics = list(dict.fromkeys(g.metric for g in crit.gates))
    cand = load_systems([candidate], qrels=qrels, metrics=metrics, queries=queries, check_metrics=False)
    # a history:last-pass baseline is the candidate system's own key: that system is known first
    from_history = baseline is not None and baseline.startswith("history:")
    cand_ev = cand.one(candidate_system, "candidate") if from_history else None
    point = (candidate, cand_ev.system) if cand_ev is not None and candidate.is_dir() else None
    base, matched = _gate_baseline(baseline, qrels, metrics, history_file, point)
    _check_same_data(allow_different_data, cand, *([base] if base is not None else []))
    cand_ev = cand_ev or cand.one(candidate_system, "candidate")
    base_ev = base.one(baseline_system or matched, "baseline") if base is not None else None
    if base is not None and base_ev is not None:
        from retbench.inputs import canonical_metrics

        pair = (
            (f"baseline {base_ev.system}", base_ev.system, base),
            (f"candidate {cand_ev.system}", cand_ev.system, cand),
        )
        _check_same_settings(allow_different_settings, [pair], canonical_metrics(metrics))
    report = run_gates(
        crit,
        cand_ev,
        base_ev,
        groups=cand.groups,
        failures=cand.failures.get(cand_ev.system),
        n_resamples=resamples,
        seed=seed,
        first=base is None and baseline is not None,
    )
    text = render_comment(report)
    typer.echo(text)
    write(comment, text)
    write(json_out, json.dumps(gate_json(report), indent=2, allow_nan=False) + "\n")
    if candidate.is_dir():
        import sqlite3

        try:
            where = history.record_gate(candidate, report.exit_code == 0, system=cand_ev.system, path=history_file)
        except (sqlite3.Error, OSError) as exc:  # the verdict stands; only its record in the history is lost
            typer.echo(f"note: verdict not recorded in the history: {exc}", err=True)
        else:
            if where is not None:
                typer.echo(
                    f"history: {cand_ev.system} {'pass' if report.exit_code == 0 else 'fail'} recorded on run {where}",
                    err=True,
                )
    if report.exit_code:
        why = (
            f"the candidate recorded {len(report.failures)} backend failure(s)"
            if report.backend_failed
            else "; ".join(sentence(r) for r in report.results if r.blocks)
        )
        raise fail(f"gate failed: {why}", report.exit_code)


def _gate_baseline(
    baseline: str | None,
    qrels: Path | None,
    metrics: list[str],
    history_file: Path | None,
    candidate: tuple[Path, str] | None,
) -> tuple[Loaded | None, str | None]:
    """The gate's baseline and the system it matched: a history entry (history:last-pass / last / <tag> / <id>),
    a results directory or a run file.

    `history:last-pass` and `history:last` of a results directory mean the latest point of the candidate's
    experiment, dataset and system before the candidate; when there is none yet (the first gate of a
    project) the gate checks thresholds only, and says so: its verdict becomes the next gate's baseline.
    """
    from retbench.inputs import load_history, load_systems
    from retbench.results.history_read import NoBaseline

    if baseline is None:
        return None, None
    if not baseline.startswith("history:"):
        return load_systems([Path(baseline)], qrels=qrels, metrics=metrics, check_metrics=False), None
    try:
        base, entry = load_history(baseline, history_file, candidate=candidate)
    except NoBaseline as exc:
        if baseline not in ("history:last-pass", "history:last"):
            raise
        typer.echo(
            f"note: {exc.reason}: this gate checks thresholds only (regression limits start with the next gate, "
            "against this run once it passes)",
            err=True,
        )
        return None, None
    typer.echo(f"baseline: history run {entry.id} of {entry.created} (commit {entry.git_commit or 'none'})", err=True)
    return base, entry.matched


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
    resamples: Annotated[
        int | None,
        typer.Option(help="Randomization and bootstrap resamples of the comparisons (default: sized to the tests)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the resampling.")] = 0,
) -> None:
    """Report a results directory: HTML (tables, metric@k curves, deltas, latency, coverage) and/or Markdown."""
    from retbench.report.html import render_html
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report

    data = build_report(results, baseline=baseline, primary=primary, n_resamples=resamples, seed=seed)
    text = report_markdown(data)
    write(markdown, text)
    write(html, render_html(data))
    if html is None and markdown is None:
        typer.echo(text)
    for path in (html, markdown):
        if path is not None:
            typer.echo(f"wrote {path}")
