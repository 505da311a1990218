"""trec_eval's own text output for an Evaluation, so retbench's figures can be diffed against trec_eval line by line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retbench.errors import ConfigError
from retbench.metrics.prefs import COUNTS as PREF_COUNTS
from retbench.metrics.registry import TREC_NICKNAMES, MetricSpec, parse_metric, parse_metrics, trec_order
from retbench.metrics.trec_rows import TREC_ORDER

if TYPE_CHECKING:
    from retbench.data import Run
    from retbench.evaluation import Evaluation


@dataclass(frozen=True)
class TrecStrings:
    """trec_eval's two measures that print text, not numbers: `runid` (the run's tag, on the `all` lines) and
    `relstring` (per query, -q only: the grades of the first `depth` documents, one character each)."""

    runid: bool = False
    relstring: str | None = None  # its printed name (`relstring`, or `relstring_20` as typed); None: not asked for
    depth: int = 10


def trec_strings(specs: Sequence[str]) -> tuple[list[str], TrecStrings]:
    """The names left once `runid` and `relstring[.N]` are taken out, and which of the two were asked for
    (directly or through a nickname: `official` and `set` hold runid, `all_trec` both). As for every trec_eval
    measure with parameters, the first `-m relstring.N` sets the depth (default 10, printed `relstring`)."""
    rest: list[str] = []
    runid, relstring, depth = False, None, 10
    for text in specs:
        raw = text.strip().replace(" ", "")
        family = raw.split(".", 1)[0]
        members = TREC_NICKNAMES.get(raw, ())
        runid |= family == "runid" or "runid" in members
        if family == "relstring" and "." in raw:
            value = raw.split(".", 1)[1]
            try:
                given = int(float(value))  # trec_eval reads it as a double and prints that many characters
            except ValueError:
                raise ConfigError(
                    f"metric {text!r}: relstring takes one number, got {value!r}", field="metric"
                ) from None
            if relstring in (None, "relstring"):
                relstring, depth = f"relstring_{value}", given
        elif family == "relstring" or "relstring" in members:
            relstring = relstring or "relstring"
        if family not in ("runid", "relstring"):
            rest.append(text)
    return rest, TrecStrings(runid, relstring, depth)


def relstrings(
    run: Run, qrels: Mapping[str, Mapping[str, int]], query_ids: Sequence[str], depth: int, *, judged_only: bool = False
) -> dict[str, str]:
    """Each query's relstring as trec_eval's `m_relstring.c` and `form_res_rels.c` write it over the ranking
    scored: a grade 0-9 as its digit, above 9 `>`, a document the qrels do not hold `-`, one they hold with a
    negative grade (in the pool, unjudged) `.`; with -J only the documents graded 0 or more; '' for an unanswered
    query."""
    out: dict[str, str] = {}
    answered = set(run.query_ids)
    for q in query_ids:
        judged = qrels.get(q, {})
        grades = [judged.get(d) for d in (run.docs(q) if q in answered else [])]
        if judged_only:
            grades = [g for g in grades if g is not None and g >= 0]
        out[q] = "".join(_grade_char(g) for g in grades[:depth])
    return out


def _grade_char(grade: int | None) -> str:
    if grade is None:
        return "-"
    return "." if grade < 0 else ">" if grade > 9 else str(grade)


def _value(v: float, integer: bool) -> str:
    """trec_eval's formats: `%ld` for its counts (num_ret, num_rel, ...), `%6.4f` for the rest."""
    if integer:
        return str(int(v)) if v == v else "nan"
    return f"{v:6.4f}"


def trec_lines(
    ev: Evaluation,
    *,
    per_query: bool = False,
    names: Mapping[str, str] | None = None,
    strings: TrecStrings | None = None,
    relstring: Mapping[str, str] | None = None,
    zscores: bool = False,
    totals: Mapping[str, float] | None = None,
) -> list[str]:
    """trec_eval's own output (`measure<TAB>query-or-all<TAB>value`, name padded to 22, `%6.4f`).

    Measures use trec_eval's names (`names` overrides them: what `trec_eval_measures` says trec_eval prints) and
    its order (its measure table, then each family's parameters in
    ascending order), read from the metric rows; per-query lines (trec_eval -q) come first, query ids in
    trec_eval's (byte) order, every counted query included (trec_eval 10 -c -q prints the unanswered ones,
    scored 0), without the measures trec_eval prints only in the summary (gm_map, gm_bpref, num_q); then the
    `all` lines, each the metric's aggregate (mean, geometric mean or sum). Measures trec_eval lacks keep
    their retbench names and come last. `strings` adds trec_eval's text measures: `runid` first among the `all`
    lines (the system's name: a run file's tag), `relstring` per query (`relstring` maps query -> its string,
    quoted as trec_eval quotes it) in its place between P and recall. `zscores`: the values are z-scores
    (trec_eval -Z), printed as trec_eval prints them: `Z` before each measure's name, every value `%6.4f`;
    `totals` gives a metric's `all` value where it is not the aggregate of the per-query values printed.
    """
    extra = strings or TrecStrings()
    printed = printed_names(ev, names)
    z = "Z" if zscores else ""
    order = sorted(range(len(printed)), key=lambda j: (trec_order(printed[j]) if ev.trec_names[j] else (1e9, 0.0), j))
    rows = [(shown, integer and not zscores) for shown, integer in (_row(m, ev.default_k) for m in ev.metrics)]
    # where relstring stands among the measures: before the first measure trec_eval prints after it
    at_rel = next((n for n, j in enumerate(order) if ev.trec_names[j] and trec_order(printed[j])[0] > _RELSTRING), None)
    lines: list[str] = []
    if per_query:
        for q, i in sorted((q, i) for i, q in enumerate(ev.query_ids)):
            row = [
                f"{z}{printed[j]:<22}\t{q}\t{_value(ev.values[i, j], rows[j][1])}" if rows[j][0] else "" for j in order
            ]
            if extra.relstring is not None and relstring is not None:
                row.insert(
                    len(row) if at_rel is None else at_rel, f"{extra.relstring:<22}\t{q}\t'{relstring.get(q, '')}'"
                )
            lines.extend(line for line in row if line)
    means = {**ev.means(), **(totals or {})}
    if extra.runid:
        lines.append(f"{'runid':<22}\tall\t{ev.system}")
    lines.extend(f"{z}{printed[j]:<22}\tall\t{_value(means[ev.metrics[j]], rows[j][1])}" for j in order)
    return lines


def printed_names(ev: Evaluation, names: Mapping[str, str] | None = None) -> list[str]:
    """The name trec_eval prints for each metric of `ev` (`names` overrides: see `trec_eval_measures`); a metric
    trec_eval lacks keeps its retbench name."""
    given = names or {}
    return [given.get(m) or t or m for t, m in zip(ev.trec_names, ev.metrics, strict=True)]


_RELSTRING = TREC_ORDER.index("relstring")


def _row(metric: str, default_k: int) -> tuple[bool, bool]:
    """(printed per query, printed as an integer) for a metric name."""
    try:
        row = parse_metric(metric, default_k).row
    except ConfigError:  # a read-back table's metric no longer registered (a plugin), or a measure of -R prefs
        return True, metric in PREF_COUNTS
    return row.per_query_line, row.aggregate == "sum"


def _one_with_params(spec: MetricSpec) -> bool:
    """A trec_eval family that is one value with parameters (utility, set_F, rbp), not a family of points."""
    row = spec.row
    params = row.trec_params or (row.params if spec.k is None else {})
    return bool(params) and bool(row.trec) and not row.show_params


def trec_eval_measures(specs: Sequence[str], default_k: int = 5) -> tuple[list[MetricSpec], dict[str, str], list[str]]:
    """The measures `trec_eval -m ...` computes for these names, the names it prints them under, and notes.

    trec_eval computes a family that is one value with parameters (utility, set_F) once: with the parameters
    of the first `-m FAMILY.params` given, else its defaults (trec_eval.c `mark_measure`, meas_init.c: the
    first matching argument wins); a bare `-m FAMILY` or a nickname adds no parameters. When parameters were
    given it prints them as typed (`utility_1,-1,0,0`, even at the defaults). So `-m utility -m
    utility.2,-1,0,0` is one measure, `utility_2,-1,0,0`; a second set of parameters is not computed (a note
    says so).
    """
    out: list[MetricSpec] = []
    chosen: dict[str, int] = {}  # a one-value family's metric name -> its index in `out`
    explicit: set[str] = set()
    printed: dict[str, str] = {}
    notes: list[str] = []
    for text in specs:
        raw = text.strip().replace(" ", "")
        for spec in parse_metrics([text], default_k):
            if not _one_with_params(spec):
                out.append(spec)
                continue
            fam = spec.metric.name
            bare = raw in TREC_NICKNAMES or raw.lower() in {fam.lower(), str(spec.row.trec or "").lower()}
            if fam in chosen and (bare or fam in explicit):
                if not bare and spec.name != out[chosen[fam]].name:
                    notes.append(
                        f"{spec.name} not computed ({raw}): trec_eval computes {fam} once, with the first parameters"
                    )
                continue
            if fam in chosen:
                out[chosen[fam]] = spec
            else:
                chosen[fam] = len(out)
                out.append(spec)
            if not bare:
                explicit.add(fam)
                trec = spec.row.trec or fam
                typed = raw[len(trec) + 1 :] if raw.startswith(trec + ".") else None
                cut = spec.row.trec_cut
                name = f"{trec}_{typed}" if typed else cut.format(k=spec.k, **spec.params) if cut else None
                if name:
                    printed[spec.name] = name
    unique = list({s.name: s for s in reversed(out)}.values())[::-1]  # duplicates: the first kept
    return unique, printed, notes
