"""`retbench eval`: score a run against judgements, like trec_eval, and print a table, JSON or trec lines."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from retbench.cli.app import console, fail, handles_errors

if TYPE_CHECKING:
    from retbench.evaluation import Evaluation
    from retbench.evaluation.flow import EvalRun
    from retbench.report.trec import TrecStrings


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
            help="A metric (repeatable): ndcg@10, P@5, recall@100, mrr, map, rprec, hit@5, bpref, recall@5(rel=2), trec_eval names (ndcg_cut_10, P.5,10, recip_rank, iprec_at_recall.0.1, set_F.0.5) or its nicknames (official, all_trec, set).",
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
        str | None,
        typer.Option(
            help="Judged queries with no relevant doc: skip (reported), zero, or one. Default: skip in trec_eval "
            "mode; zero in pytrec_eval mode and with --format trec, as trec_eval, pytrec_eval and BEIR count them."
        ),
    ] = None,
    judged_only: Annotated[
        bool,
        typer.Option(
            "--judged-only",
            "-J",
            help="Score the judged documents only, in their order (trec_eval -J, condensed lists).",
        ),
    ] = False,
    max_docs: Annotated[
        int | None, typer.Option("--max-docs", "-M", help="Documents per query scored (trec_eval -M).")
    ] = None,
    collection_size: Annotated[
        int | None,
        typer.Option("--collection-size", "-N", help="Documents in the collection (trec_eval -N; read by utility)."),
    ] = None,
    complete: Annotated[
        bool,
        typer.Option(
            "--complete",
            "-c",
            help="trec_eval -c: every judged query counts, unanswered ones as 0 (already the trec_eval mode's rule).",
        ),
    ] = False,
    mode: Annotated[
        str,
        typer.Option(help="trec_eval (all judged queries, unanswered = 0) or pytrec_eval (answered only, as BEIR)."),
    ] = "trec_eval",
    identical_ids: Annotated[
        bool | None,
        typer.Option(
            "--ignore-identical-ids/--keep-identical-ids",
            help="Drop a retrieved doc whose id is its query's, as BEIR does. Default: dropped in pytrec_eval mode, "
            "kept in trec_eval mode.",
        ),
    ] = None,
    recall_rounding: Annotated[
        str | None,
        typer.Option(
            help="Where recall level p falls among R relevant documents (iprec_at_recall, 11pt_avg): round "
            "(trec_eval 10.0: lround(p*R)) or floor_plus_0.9 (trec_eval 9, pytrec_eval: (long)(p*R + 0.9)). "
            "Default: round in trec_eval mode, floor_plus_0.9 in pytrec_eval mode."
        ),
    ] = None,
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
    relevance_format: Annotated[
        str,
        typer.Option(
            "--relevance-format",
            "-R",
            help="trec_eval -R: qrels, qrels_jg (`query group doc grade`; -m qrels_jg), prefs (`query group subgroup "
            "doc level`) or qrels_prefs (qrels read as preferences; -m all_prefs, prefs); --format trec.",
        ),
    ] = "qrels",
    zscores: Annotated[
        Path | None,
        typer.Option(
            "--zscores",
            "-Z",
            help="trec_eval -Z: print each value as a z-score, (value - mean) / stddev, from this file's "
            "`query measure mean stddev` lines (--format trec).",
        ),
    ] = None,
    subtopic_qrels: Annotated[
        Path | None,
        typer.Option(
            help="Subtopic qrels (ndeval's `query subtopic doc grade` lines) for the diversity measures "
            "(alpha_nDCG@k, ERR_IA@k, NRBP, P_IA@k, STREC@k); every other metric reads QRELS."
        ),
    ] = None,
) -> None:
    """Score a run against judgements, like trec_eval (-c): every judged query counts, unanswered ones as 0."""
    from retbench.evaluation.flow import read_inputs, score, usable_metrics
    from retbench.metrics.settings import EvalSettings

    if fmt not in ("table", "json", "trec"):
        raise fail(f"--format must be table, json or trec, got {fmt!r}")
    if zscores is not None and fmt != "trec":
        raise fail("-Z/--zscores prints trec_eval's z-scores: it goes with --format trec")
    if relevance_format != "qrels":
        from retbench.evaluation.trec_inputs import other_format
        from retbench.report.trec import TrecStrings

        if fmt != "trec":
            raise fail(f"-R {relevance_format} prints trec_eval's lines: it goes with --format trec")
        other = {"relevance_level": relevance_level, "judged_only": judged_only, "max_docs": max_docs}
        ev, runid = other_format(relevance_format, qrels, run, metric or [], **other)
        return _print_trec(ev, per_query, [], {}, TrecStrings(runid=runid))
    if complete and mode != "trec_eval":
        raise fail(f"-c counts every judged query, as --mode trec_eval does; it cannot go with --mode {mode}")
    settings = EvalSettings(
        relevance_level=relevance_level,
        no_relevant=no_relevant or ("zero" if fmt == "trec" else None),  # None: by the mode
        mode=mode,
        default_k=default_k,
        ignore_identical_ids=identical_ids,
        judged_only=judged_only,
        max_docs=max_docs,
        collection_size=collection_size,
        recall_rounding=recall_rounding,
    )
    inputs = read_inputs(qrels, run, split=split, labels=labels, llm_qrels=llm_qrels, subtopic_qrels=subtopic_qrels)
    if metric:
        names: list[Any] = list(metric)
    elif fmt == "trec" and inputs.samples is None:
        names = ["official"]  # trec_eval's own default set
    else:
        names = inputs.default_metrics()
    printed: dict[str, str] = {}
    trec_notes: list[str] = []
    strings = None
    if fmt == "trec":  # trec_eval's text measures, its rule for a family asked for twice, and its printed names
        from retbench.report.trec import trec_eval_measures, trec_strings

        names, strings = trec_strings(names)
    names, refused = usable_metrics(names, default_k)
    if fmt == "trec":
        names, printed, trec_notes = trec_eval_measures(names, default_k)
    done = score(inputs, names, settings, refused=refused)
    ev = done.evaluation
    if tsv is not None:
        ev.to_tsv(tsv)
    if fmt == "trec":
        relstring = None
        if strings is not None and strings.relstring and per_query:
            from retbench.report.trec import relstrings

            scored = inputs.run.truncate(max_docs) if max_docs is not None else inputs.run
            relstring = relstrings(scored, inputs.judged, ev.query_ids, strings.depth, judged_only=judged_only)
        from retbench.evaluation.trec_inputs import zscored
        from retbench.report.trec import printed_names

        shown, totals = zscored(ev, zscores, printed_names(ev, printed), complete)
        _print_trec(shown, per_query, done.notes + trec_notes, printed, strings, relstring, zscores is not None, totals)
    elif fmt == "json":
        _print_json(done, per_query, ci)
    else:
        _print_table(done, per_query, ci)
    if refused:  # the measures that could be computed are printed above; the others fail the command
        raise fail("; ".join(refused))


def _print_trec(
    ev: Evaluation,
    per_query: bool,
    notes: list[str],
    printed: dict[str, str],
    strings: TrecStrings | None = None,
    relstring: dict[str, str] | None = None,
    zscores: bool = False,
    totals: dict[str, float] | None = None,
) -> None:
    """trec_eval's three columns on stdout; the mode and notes as comments on stderr."""
    from retbench.report.trec import trec_lines

    lines = trec_lines(
        ev, per_query=per_query, names=printed, strings=strings, relstring=relstring, zscores=zscores, totals=totals
    )
    for line in lines:
        typer.echo(line)
    for note in [f"mode: {ev.label}", *notes]:
        typer.echo(f"# {note}", err=True)


def _print_json(done: EvalRun, per_query: bool, ci: bool) -> None:
    """The evaluation as JSON (strict: no NaN), with tag breakdowns for golden sets; each metric carries its
    `estimate`: which labels it comes from (human, llm, ppi), n human- and LLM-labelled queries, mean and CI."""
    import json

    from retbench.data.samples import groups_from_samples
    from retbench.io.files import json_safe

    ev, samples = done.evaluation, done.inputs.samples
    out = ev.to_dict(per_query=per_query, ci=ci)
    for m, agg in out["metrics"].items():
        agg["estimate"] = done.estimate(m, agg)
    out["labels"] = done.inputs.labels
    if samples is not None:
        groups = groups_from_samples(samples)
        if groups:
            out["breakdown"] = ev.breakdown(groups)
            out["group_sizes"] = ev.group_sizes(groups)
    typer.echo(json.dumps(json_safe(out), indent=2, allow_nan=False))


def _print_table(done: EvalRun, per_query: bool, ci: bool) -> None:
    """Means (with CIs) and their label source where not human, tag breakdowns and per-query rows as
    terminal tables, then the notes."""
    from rich.table import Table

    from retbench.data.samples import groups_from_samples
    from retbench.estimates import source_label
    from retbench.report import fmt
    from retbench.report.terminal import FittedTable

    con = console()
    ev, samples = done.evaluation, done.inputs.samples
    agg = ev.aggregate(ci=ci)
    sources = {m: source_label(done.estimate(m, a), value=True) for m, a in agg.items()}
    table = Table(
        "metric",
        "mean",
        *(["95% CI"] if ci else []),
        "n",
        *(["labels"] if any(sources.values()) else []),
        title=f"{ev.system}: {len(ev.query_ids)} queries, mode {ev.label}",
    )
    for m, a in agg.items():
        table.add_row(
            m,
            fmt.num(a["mean"], missing=fmt.NO_SCORE),
            *([fmt.interval(a["ci_low"], a["ci_high"]) if fmt.finite(a["mean"]) else ""] if ci else []),
            _n_of(a),
            *([sources[m] or "human"] if any(sources.values()) else []),
        )
    con.print(table)
    if samples is not None:
        groups = groups_from_samples(samples)
        if groups:
            sizes = ev.group_sizes(groups)
            rows = [
                [tag, str(sizes[tag]), *(f"{v:.4f}" for v in means.values())]
                for tag, means in ev.breakdown(groups).items()
            ]
            con.print(
                FittedTable(["group", "n", *ev.metrics], rows, title="breakdown by tag / category", corner="metric")
            )
    if per_query:
        rows = [[r["query_id"], r["status"], *(f"{r[m]:.4f}" for m in ev.metrics)] for r in ev.per_query()]
        con.print(FittedTable(["query", "status", *ev.metrics], rows, keys=2, corner="metric"))
    for note in done.notes:
        con.print(f"note: {note}", markup=False, highlight=False)


def _n_of(agg: dict[str, Any]) -> str:
    """The queries a metric was averaged over: "n", or "n of M" when it applies to only some."""
    return f"{int(agg['n'])} of {int(agg['of'])}" if "of" in agg else str(int(agg["n"]))


@handles_errors
def metrics_command(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every row as JSON (what the docs page is built from).")
    ] = False,
) -> None:
    """List every metric the registry declares (plugins included): name, label, cutoff, parameters, trec_eval name, meaning."""
    import json

    from rich.table import Table

    from retbench.metrics.catalog import catalog

    rows = catalog()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="metrics (k: needs a cutoff, optional: uncut unless @k, none: takes none)")
    for col in ("name", "label", "cutoff", "parameters", "trec_eval", "meaning"):
        table.add_column(col)
    for r in rows:
        params = ", ".join(f"{k}={v:g}" for k, v in r["parameters"].items())
        table.add_row(r["name"], r["label"], r["cutoff"], params, ", ".join(r["trec_eval"]), r["meaning"])
    console().print(table)
