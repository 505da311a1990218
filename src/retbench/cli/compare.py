"""`retbench compare`, `gate` and `report`: paired comparisons, ship criteria, and report files."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from retbench.cli.app import fail, handles_errors, names, stage_bars, write


def _note(line: str) -> None:
    """A line said on the way (a note, the baseline found, where a verdict was recorded), to stderr."""
    typer.echo(line, err=True)


_FORMAT_HELP = "What to print: markdown, or latex (a booktabs table for papers: best bold, significance marks)."
_LATEX_HELP = "Write a booktabs LaTeX table (systems x metrics, best bold, significance marks) here."


def _format(value: str) -> str:
    """The --format asked for, checked (a usage error, exit 2, names the choices)."""
    if value not in ("markdown", "latex"):
        raise fail(f"--format must be markdown or latex, not {value!r}")
    return value


# retbench.stats.MAX_RESAMPLES, written out so `--help` does not import NumPy (a test keeps the two equal)
_RESAMPLES_BOUND = (
    " At most 1,000,000: a randomization p cannot go below 1 / (resamples + 1), so a million already resolve "
    "p = 1e-6 (Holm over 5,000 tests), and more only cost time."
)


def _resamples(value: int | None) -> int | None:
    """--resamples checked before any file is read, by the library's own rule, with the option named."""
    if value is None:
        return None
    from retbench.errors import InputError
    from retbench.stats.paired import check_resamples

    try:
        return check_resamples(value, "--resamples")
    except InputError as exc:
        raise fail(f"--resamples: {exc.reason}") from None


_SEQUENTIAL_HELP = (
    "Also give each delta an anytime-valid confidence sequence (valid when the comparison is re-run and looked "
    "at after every batch of queries, stopping whenever it likes; docs/howto/how-sure.md)."
)


_ALLOW_SETTINGS_HELP = (
    "Go on when the sides differ in depth (below a compared cutoff), relevance level or no-relevant policy "
    "(printed as a note)."
)


@handles_errors
def compare_command(
    inputs: Annotated[
        list[Path] | None,
        typer.Argument(help="Results directories and/or TREC run files (run files need --qrels)."),
    ] = None,
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
            "at least 10,000)." + _RESAMPLES_BOUND
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the resampling (results are reproducible under it).")] = 0,
    top: Annotated[int, typer.Option(help="Most changed queries to list per metric.")] = 5,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full comparison as JSON.")] = None,
    markdown_out: Annotated[Path | None, typer.Option("--markdown", help="Write the comparison as Markdown.")] = None,
    latex_out: Annotated[Path | None, typer.Option("--latex", help=_LATEX_HELP)] = None,
    output_format: Annotated[str, typer.Option("--format", help=_FORMAT_HELP)] = "markdown",
    allow_different_data: Annotated[
        bool, typer.Option(help="Compare results computed on different corpora or qrels (printed as a note).")
    ] = False,
    allow_different_settings: Annotated[bool, typer.Option(help=_ALLOW_SETTINGS_HELP)] = False,
    labels: Annotated[
        Path | None, typer.Option("--labels", help="A label study (`retbench label init`): its PPI answer.")
    ] = None,
    sequential: Annotated[bool, typer.Option("--sequential", help=_SEQUENTIAL_HELP)] = False,
) -> None:
    """Paired A/B comparison: deltas with bootstrap CIs, randomization/t/Wilcoxon p-values, Holm-corrected.

    By default each system against the baseline on the primary metrics; --all-pairs and --metrics all widen it.
    """
    import json

    if labels is not None:
        _study_answer(labels, json_out)
        return
    if not inputs:
        raise fail("give results directories or run files to compare, or --labels STUDY")
    if qrels is None and len(inputs) == 2 and all(p.is_file() for p in inputs):
        _label_free(inputs, queries, seed, top, json_out, markdown_out)
        return

    from retbench.comparison import compare
    from retbench.inputs import canonical_metrics, check_same_data, check_same_settings, load_systems, primary_metrics
    from retbench.report.latex import comparison_latex
    from retbench.report.markdown import comparison_markdown
    from retbench.report.resolution import resolution_markdown
    from retbench.resolution import resolve

    output_format = _format(output_format)
    resamples = _resamples(resamples)
    every_metric = names(metrics) == ["all"]
    asked = None if every_metric else names(metrics)
    loaded = load_systems(inputs, qrels=qrels, metrics=asked, queries=queries, systems=names(systems))
    check_same_data(allow_different_data, loaded, note=lambda m: _note(f"note: {m}"))
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
    check_same_settings(allow_different_settings, sides, tested, note=lambda m: _note(f"note: {m}"))
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
    if sequential:
        from retbench.anytime import attach_sequences

        attach_sequences(cmp, loaded.evaluations)
    if cmp.note:
        typer.echo(f"note: {cmp.note}", err=True)
    text = comparison_markdown(cmp, options=_widen_hints(all_pairs, metrics, len(loaded.evaluations)))
    ranked = resolve([e for e in loaded.evaluations if e.system in in_pairs], tested[0]) if tested else None
    if ranked is not None:
        text = text.rstrip("\n") + "\n\n" + "\n".join(resolution_markdown(ranked, tested[0]))
    table = comparison_latex(cmp) if latex_out is not None or output_format == "latex" else ""
    typer.echo(table if output_format == "latex" else text)
    write(markdown_out, text)
    write(latex_out, table)
    write(json_out, json.dumps(cmp.to_dict(), indent=2, allow_nan=False) + "\n")


def _label_free(
    inputs: list[Path], queries: Path | None, seed: int, top: int, json_out: Path | None, markdown_out: Path | None
) -> None:
    """`compare A.run B.run` without --qrels: what `retbench diff` says (how much the top 10 moves, no labels)."""
    import json

    from retbench.io.beir import read_queries
    from retbench.movement import diff
    from retbench.report.diff import diff_markdown

    _note("note: no --qrels: comparing the two runs without labels (as `retbench diff`)")
    texts = dict(read_queries(queries).items()) if queries is not None else None
    d = diff(inputs[0], inputs[1], queries=texts, top=top, seed=seed)
    text = diff_markdown(d)
    typer.echo(text)
    write(markdown_out, text)
    write(json_out, json.dumps(d.to_dict(), indent=2, allow_nan=False) + "\n")


def _study_answer(study: Path, json_out: Path | None) -> None:
    """`compare --labels STUDY`: the study's systems and decision, estimated from LLM and people's labels."""
    import json

    from retbench.report.label_study import answer_lines
    from retbench.studies.labels.answer import estimate_study

    answer = estimate_study(study)
    typer.echo("\n".join(answer_lines(answer, int(json.loads((study / "study.json").read_text())["k"]))))
    write(json_out, json.dumps(answer, indent=2, allow_nan=False) + "\n")


def _widen_hints(all_pairs: bool, metrics: str | None, n_systems: int) -> list[str]:
    """The heading's hints of options that widen the comparison, each only while it is not given and would widen
    it (`--all-pairs` adds pairs only beside more than two systems)."""
    hints = []
    if not all_pairs and n_systems > 2:
        hints.append("other pairs: `--all-pairs`")
    if metrics is None:
        hints.append("other metrics: `--metrics`, or `--metrics all`")
    elif names(metrics) != ["all"]:
        hints.append("every metric: `--metrics all`")
    return hints


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
    candidate: Annotated[Path | None, typer.Option(help="Candidate: a results directory or a TREC run file.")] = None,
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
    resamples: Annotated[int, typer.Option(help="Randomization test resamples." + _RESAMPLES_BOUND)] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed of the randomization test.")] = 0,
    history_file: Annotated[
        Path | None, typer.Option(help="History database (default: $RETBENCH_HISTORY or the per-user one).")
    ] = None,
    allow_different_data: Annotated[
        bool, typer.Option(help="Gate on a baseline computed on other corpora or qrels (printed as a note).")
    ] = False,
    allow_different_settings: Annotated[bool, typer.Option(help=_ALLOW_SETTINGS_HELP)] = False,
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            help="Judge a label study's PPI estimates instead (`retbench label init`): its decision B − A, or the "
            "systems named by --candidate-system / --baseline-system.",
        ),
    ] = None,
) -> None:
    """Apply ship criteria. Exit 0 pass (warnings print), 1 an error gate failed, 2 bad criteria, 3 backend failures.

    A candidate results directory registered in the history gets the verdict recorded (history:last-pass).
    """
    import json

    from retbench.gates import gate
    from retbench.report.gate_comment import gate_json, render_comment, sentence

    checked = _resamples(resamples)
    if labels is not None:
        given = [f"--{n}" for n, v in (("candidate", candidate), ("baseline", baseline), ("qrels", qrels)) if v]
        if given:
            raise fail(
                f"--labels takes the systems from the study: drop {', '.join(given)} and name them with "
                "--candidate-system / --baseline-system (default: the study's decision)"
            )
        from retbench.studies.labels.gate import gate_study  # deferred: the study's numpy work, for start-up time

        done = gate_study(
            criteria, labels, candidate_system=candidate_system, baseline_system=baseline_system, note=_note
        )
    elif candidate is None:
        raise fail("give --candidate (a results directory or a TREC run file), or --labels STUDY")
    else:
        done = gate(
            criteria,
            candidate,
            baseline,
            candidate_system=candidate_system,
            baseline_system=baseline_system,
            qrels=qrels,
            queries=queries,
            history_file=history_file,
            allow_different_data=allow_different_data,
            allow_different_settings=allow_different_settings,
            n_resamples=resamples if checked is None else checked,
            seed=seed,
            note=_note,
        )
    report = done.report
    text = render_comment(report)
    typer.echo(text)
    write(comment, text)
    write(json_out, json.dumps(gate_json(report), indent=2, allow_nan=False) + "\n")
    if report.exit_code:
        why = (
            f"the candidate recorded {len(report.failures)} backend failure(s)"
            if report.backend_failed
            else "; ".join(
                [
                    *(sentence(r) for r in report.results if r.blocks),
                    *(m.sentence() for m in report.movement if m.blocks),
                ]
            )
        )
        raise fail(f"gate failed: {why}", report.exit_code)


@handles_errors
def report_command(
    results: Annotated[Path, typer.Argument(help="A results directory (from `retbench run`).")],
    html: Annotated[
        Path | None, typer.Option(help="Write one self-contained HTML file (tables and SVG plots, opens offline).")
    ] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write the report as Markdown.")] = None,
    latex: Annotated[Path | None, typer.Option(help=_LATEX_HELP)] = None,
    output_format: Annotated[str, typer.Option("--format", help=_FORMAT_HELP)] = "markdown",
    baseline: Annotated[
        str | None, typer.Option(help="System the others are compared with (default: the first).")
    ] = None,
    primary: Annotated[
        str | None, typer.Option(help="Metric of the per-query delta plots (default: the first).")
    ] = None,
    resamples: Annotated[
        int | None,
        typer.Option(
            help="Randomization and bootstrap resamples of the comparisons (default: sized to the tests)."
            + _RESAMPLES_BOUND
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the resampling.")] = 0,
) -> None:
    """Report a results directory: HTML (tables, metric@k curves, deltas, latency, coverage) and/or Markdown."""
    from retbench.report.html import render_html
    from retbench.report.latex import report_latex
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report
    from retbench.results import read_results

    output_format = _format(output_format)
    resamples = _resamples(resamples)
    data = build_report(read_results(results), baseline=baseline, primary=primary, n_resamples=resamples, seed=seed)
    text = report_markdown(data)
    table = report_latex(data) if latex is not None or output_format == "latex" else ""
    write(markdown, text)
    write(html, render_html(data))
    write(latex, table)
    if output_format == "latex" and latex is None:
        typer.echo(table)
    elif html is None and markdown is None and latex is None:
        typer.echo(text)
    for path in (html, markdown, latex):
        if path is not None:
            typer.echo(f"wrote {path}")
