"""The gate's words: the Markdown PR comment, one sentence per gate, and the JSON output's messages.

`retbench.gates` decides (numbers, checks, verdict); this module says it. Each gate goes by the name the user gave it. Values go through `report.fmt` in the
metric's unit (shares as percentages and percentage points, scores as decimals), so the comment reads
like every other report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retbench.anytime import WATCHING
from retbench.criteria import EPS, Gate, Limits
from retbench.data.status import FAILED_COUNT, NOT_ANSWERED_COUNTS
from retbench.gates import Check, GateReport, GateResult
from retbench.metrics.registry import lower_is_better
from retbench.report import fmt
from retbench.report.label_study import label_source
from retbench.report.markdown import md_text
from retbench.report.plan import detects_sentence, size
from retbench.report.weakening import gate_caveats


def label(gate: Gate) -> str:
    """How the comment names a gate: by the name the user gave it, with its metric when the name is not the
    metric's own ('recall_at_5 (recall@5)'), so two gates on one metric are told apart."""
    metric = fmt.metric_label(gate.metric)
    if gate.name in (gate.metric, metric):
        return gate.name
    return f"{gate.name} ({metric})"


def abs_pp(value: float, metric: str = "recall") -> str:
    """A size of change without its sign, in the metric's unit: recall 0.03 -> '3.0 pp', nDCG 0.03 -> '0.030'."""
    return fmt.size(metric, value)


def sentence(r: GateResult) -> str:
    """'recall_at_5 (recall@5) dropped from 87.0% to 81.0% (-6.0 pp, p = 0.003): blocks merge'."""
    name, m = label(r.gate), r.gate.metric
    if r.baseline is None or r.delta is None:
        head = f"{name} is {fmt.value(m, r.candidate)}"
    elif abs(r.delta) <= EPS:
        head = f"{name} is unchanged at {fmt.value(m, r.candidate)} ({fmt.pvalue(r.p)})"
    else:
        verb = "dropped" if r.delta < 0 else "rose"
        head = (
            f"{name} {verb} from {fmt.value(m, r.baseline)} to {fmt.value(m, r.candidate)} "
            f"({fmt.change(m, r.delta)}, {fmt.pvalue(r.p)})"
        )
    study = study_source(r)
    return f"{head}{f' ({study})' if study else ''}: {r.outcome}"


def study_source(r: GateResult) -> str:
    """'PPI, 40 human / 236 LLM labels, judged@10 0.97' for a gate judged on a label study ('' otherwise)."""
    e = r.estimate
    if not e or not e.get("label_study"):
        return ""
    kind = {"ppi": "PPI", "human": "human", "llm": "LLM"}[e["source"]]
    return label_source({**e, "estimate": kind}, int(e["k"]))


def _study_note(r: GateResult) -> str:
    """A label-study gate's intervals and the limits they cannot settle yet."""
    e, m = r.estimate or {}, r.gate.metric
    parts = [study_source(r)]
    if e.get("candidate_low") is not None:
        parts.append(
            f"candidate {fmt.value(m, r.candidate)} [{fmt.value(m, e['candidate_low'])}, "
            f"{fmt.value(m, e['candidate_high'])}]"
        )
    if e.get("delta") is not None and e.get("ci_low") is not None:
        parts.append(
            f"change {fmt.change(m, e['delta'])} [{fmt.change(m, e['ci_low'])}, {fmt.change(m, e['ci_high'])}]"
        )
    if e.get("undecided"):
        what = " and ".join("the change limit" if k == "regression" else f"the {k}" for k in e["undecided"])
        parts.append(f"undecided: the interval holds {what} (more human labels could turn this verdict)")
    return "; ".join(parts)


def check_note(c: Check, metric: str = "recall") -> str:
    """What a check that passed only because the drop was not significant has to say ('' otherwise)."""
    if not c.waived:
        return ""
    verb, change = ("rose", "rise") if c.lower_is_better else ("dropped", "drop")
    if c.sequential:
        return (
            f"{verb} {abs_pp(c.value, metric)}, more than the {abs_pp(c.limit, metric)} allowed, but the "
            f"{1 - (c.alpha or 0.05):.0%} confidence sequence of the change still holds 0 (no {change} shown yet)"
        )
    return (
        f"{verb} {abs_pp(c.value, metric)}, more than the {abs_pp(c.limit, metric)} allowed, "
        f"but the {change} is not statistically significant ({fmt.pvalue(c.p)}, needs p < {c.alpha:g})"
    )


def reasons(r: GateResult) -> list[str]:
    """Why it failed (or what nearly failed), in words."""
    out, m = [], r.gate.metric
    for c in r.checks:
        where = "" if c.scope == "all" else f"on tag `{c.scope}`: "
        if c.kind == "floor" and not c.passed:
            out.append(f"{where}{fmt.value(m, c.value)} is below the {fmt.value(m, c.limit)} floor")
        elif c.kind == "ceiling" and not c.passed:
            out.append(f"{where}{fmt.value(m, c.value)} is above the {fmt.value(m, c.limit)} ceiling (lower is better)")
        elif c.kind == "regression" and not c.passed:
            change = "rise" if c.lower_is_better else "drop"
            out.append(f"{where}the {change} of {abs_pp(c.value, m)} exceeds the {abs_pp(c.limit, m)} allowed")
        elif c.waived:
            out.append(f"{where}{check_note(c, m)}")
    return out


def detectable_note(r: GateResult) -> str:
    """'this gold set detects a drop of 5.1 pp; the limit is 3.0 pp' ('' without a baseline)."""
    if r.detectable is None:
        return ""
    change = "rise" if lower_is_better(r.gate.metric) else "drop"
    return detects_sentence(r.gate.metric, r.detectable, r.gate.limits.regression_max, change)


def sequence_note(r: GateResult) -> str:
    """'change: 95% confidence sequence [-3.1 pp, +0.4 pp] over 300 queries; anytime-valid: ...' ('' if none)."""
    if not r.sequence:
        return ""
    m = r.gate.metric
    key, what = ("delta", "change") if "delta" in r.sequence else ("b", "candidate")
    s = r.sequence[key]
    show = fmt.change if key == "delta" else fmt.value
    kind = "" if s["exact"] else ", asymptotic"
    return (
        f"{what}: {1 - s['alpha']:.0%} confidence sequence [{show(m, s['low'])}, {show(m, s['high'])}] "
        f"over {s['n']} queries{kind}; {WATCHING}"
    )


def source_note(r: GateResult) -> str:
    """Which labels a gate's numbers come from, in words: 'human labels, 300 queries', 'LLM labels (judge bias
    not corrected), 300 queries', or 'PPI change -1.2 pp [-2.5 pp, +0.1 pp], 113 human / 286 LLM-labelled queries'."""
    e, m = r.estimate, r.gate.metric
    if not e:
        return ""
    if e.get("label_study"):
        return _study_note(r)
    if e["source"] == "ppi":  # in the metric's unit: percentage points for a share, decimals for a score
        return (
            f"PPI change {fmt.change(m, e['delta'])} [{fmt.change(m, e['ci_low'])}, {fmt.change(m, e['ci_high'])}], "
            f"{e['n_human']} human / {e['n_llm']} LLM-labelled queries"
        )
    if e["source"] == "llm":
        return f"LLM labels (judge bias not corrected), {e['n_llm']} queries"
    return f"human labels, {e['n_human']} queries"


def gate_json(report: GateReport) -> dict[str, Any]:
    """The JSON output: the report's numbers, each gate with its sentence and reasons, each check its note."""
    data = report.to_dict()
    for r, g in zip(report.results, data["gates"], strict=True):
        g["message"], g["reasons"] = sentence(r), reasons(r)
        g["detectable_note"] = detectable_note(r)
        g["source_note"] = source_note(r)
        g["sequence_note"] = sequence_note(r)
        for c, cj in zip(r.checks, g["checks"], strict=True):
            cj["note"] = check_note(c, r.gate.metric)
        g["label"] = label(r.gate)
    data["caveats"] = gate_caveats(report)
    return data


_ICON = {"pass": "✅", "warn": "⚠️", "fail": "❌"}


def _icon(r: GateResult) -> str:
    return _ICON["pass"] if r.passed else _ICON["fail"] if r.blocks else _ICON["warn"]


def _limits_text(lim: Limits, metric: str, detectable: float | None = None) -> str:
    lower = lower_is_better(metric)
    parts = []
    if lim.threshold is not None:
        parts.append(f"{'at most' if lower else 'at least'} {fmt.value(metric, lim.threshold)}")
    if lim.regression_max is not None:
        text = f"may {'rise' if lower else 'drop'} at most {abs_pp(lim.regression_max, metric)}"
        if detectable is not None:
            text += f" (detectable: {size(metric, detectable)})"
        parts.append(text)
    return ", ".join(parts)


def _side(name: str | None, counts: Mapping[str, int] | None) -> str:
    if not name or not counts:
        return ""
    text = f"`{name}` {fmt.coverage(counts['answered'], counts['queries'])} queries"
    extra = [f"{counts[k]} {k}" for k in NOT_ANSWERED_COUNTS if counts.get(k)]
    return text + (f" ({', '.join(extra)}, counted as 0)" if extra else "")


def _verdict(report: GateReport, blocking: Sequence[object], warned: Sequence[object]) -> list[str]:
    lines: list[str] = []
    if report.backend_failed:
        n = len(report.failures)
        total = report.candidate_counts["queries"]
        judged = report.candidate_counts.get(FAILED_COUNT, n)
        # failures are counted over every query asked, the coverage over the judged ones only: a failure on a
        # query without relevant documents is not one "of" the judged total
        where = (
            f"{n} of {total} queries"
            if judged == n
            else f"{fmt.counted(n, 'query', 'queries')} ({judged} of the {total} judged ones)"
        )
        lines.append(f"### ❌ Retrieval quality gate: blocks merge — the candidate's retriever failed on {where}")
        kinds: dict[str, int] = {}
        for s in report.failures.values():
            kinds[s] = kinds.get(s, 0) + 1
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items()))
        lines += [
            "",
            f"The backend recorded failures ({detail}; {report.criteria.max_failed_queries} allowed), "
            "so the numbers below are not trustworthy. Fix the backend and run again.",
        ]
    elif blocking:
        lines.append("### ❌ Retrieval quality gate: blocks merge")
    elif warned:
        lines.append("### ⚠️ Retrieval quality gate: passes with warnings")
    else:
        lines.append("### ✅ Retrieval quality gate: passes")
    return [*lines, ""]


def _movement_table(report: GateReport) -> list[str]:
    """One row per label-free limit: the measure's mean over every query of either run, its interval, the limit."""
    if not report.movement:
        return []
    lines = [
        "Movement against the baseline (no labels: `retbench diff`'s measures over every query of either run)",
        "",
        "| | Limit | Measure | Mean (95% CI) | Limit | Queries changed | Result |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in report.movement:
        lim = m.limit
        bound = ", ".join(f"{w} {v:g}" for w, v in (("at most", lim.max), ("at least", lim.min)) if v is not None)
        icon = _ICON["pass"] if m.passed else _ICON["fail"] if m.blocks else _ICON["warn"]
        outcome = "passes" if m.passed else "blocks merge" if m.blocks else "warning, does not block merge"
        lines.append(
            f"| {icon} | {lim.name} ({lim.severity}) | {lim.measure}@{lim.k}"
            + (f" (p = {lim.p:g})" if lim.measure.startswith("rbo") else "")
            + f" | {m.value:.3f} ({m.low:.3f}–{m.high:.3f}) | {bound} | {m.changed} of {m.queries} | {outcome} |"
        )
    return [*lines, ""]


def _gate_table(report: GateReport) -> list[str]:
    """One row per gate: baseline, candidate, change with its p, the limit and the outcome."""
    lines = ["| | Gate | Baseline | Candidate | Change | Limit | Result |", "|---|---|---|---|---|---|---|"]
    for r in report.results:
        m = r.gate.metric
        change = f"{fmt.change(m, r.delta)} ({fmt.pvalue(r.p)})" if r.delta is not None else "—"
        result = r.outcome + (f": {'; '.join(reasons(r))}" if reasons(r) else "")
        limits = _limits_text(r.gate.limits, m, r.detectable)
        plain = not r.estimate or (r.estimate["source"] == "human" and not r.estimate.get("label_study"))
        labels = "" if plain else f" — {source_note(r)}"
        lines.append(
            f"| {_icon(r)} | {label(r.gate)} ({r.gate.severity}){labels} | {fmt.value(m, r.baseline) if r.baseline is not None else '—'} | "
            f"{fmt.value(m, r.candidate)} | {change} | {limits} | {result} |"
        )
    return [*lines, ""]


def _sources_and_power(report: GateReport) -> list[str]:
    """Where each gate's labels came from, and how small a change the queries can see."""
    lines: list[str] = []
    sources = [r for r in report.results if r.estimate]
    if sources:
        lines.append("Labels: " + "; ".join(f"{label(r.gate)} from {source_note(r)}" for r in sources) + ".")
        lines.append("")
    watched = [r for r in report.results if r.sequence]
    if watched:
        lines += [f"- {label(r.gate)}: {sequence_note(r)}." for r in watched] + [""]
    limited = [r for r in report.results if r.detectable is not None and r.gate.limits.regression_max is not None]
    if limited:
        lines.append(
            f"How small a change these queries can see (80% power at alpha {report.criteria.alpha:g}, "
            "from the spread of the per-query changes; `retbench plan` tells how many labelled queries a limit needs):"
        )
        for r in limited:
            seen = r.detectable is not None and r.detectable <= (r.gate.limits.regression_max or 0.0) + EPS
            lines.append(f"- {'' if seen else '⚠️ '}{label(r.gate)}: {detectable_note(r)}.")
        lines.append("")
    return lines


def _sides(report: GateReport) -> list[str]:
    """Each side's coverage, and what the evaluation mode means for the gate."""
    who = f"Candidate {_side(report.candidate, report.candidate_counts)}"
    if report.baseline:
        who += f"; baseline {_side(report.baseline, report.baseline_counts)}"
    lines = [who + "."]
    if report.mode != "trec_eval":
        lines.append(
            f"The runs were evaluated in {report.mode} mode; the gate still counts every judged query, "
            "scoring unanswered ones 0, so a failing backend cannot raise its own numbers."
        )
    return [*lines, ""]


def _tag_tables(report: GateReport, max_tags: int) -> list[str]:
    """Per gate with tags, the tags' changes, biggest drops first, folded away."""
    lines: list[str] = []
    for r in [r for r in report.results if r.tags]:
        rows = sorted(r.tags, key=lambda t: (t.delta if t.delta is not None else 0.0, t.tag))[:max_tags]
        more = len(r.tags) - len(rows)
        lines += [
            "<details>",
            f"<summary>{label(r.gate)} by tag ({len(r.tags)} tags, biggest drops first)</summary>",
            "",
            "| Tag | Queries | Baseline | Candidate | Change |",
            "|---|---|---|---|---|",
        ]
        for t in rows:
            flag = " ⚠️" if t.tag in r.gate.tags and any(not c.passed for c in r.checks if c.scope == t.tag) else ""
            m = r.gate.metric
            change = f"{fmt.change(m, t.delta)} ({fmt.pvalue(t.p)})" if t.delta is not None else "—"
            base = fmt.value(m, t.baseline) if t.baseline is not None else "—"
            lines.append(f"| `{t.tag}`{flag} | {t.n} | {base} | {fmt.value(m, t.candidate)} | {change} |")
        if more > 0:
            lines.append(f"| … {more} more tags in the JSON output | | | | |")
        lines += ["", "</details>", ""]
    return lines


def _how_to_read(report: GateReport) -> list[str]:
    """The folded glossary: each gated metric's meaning, pp, p, detectable, label sources, severities."""
    metrics = list(dict.fromkeys(r.gate.metric for r in report.results))
    lines = ["<details>", "<summary>How to read this</summary>", ""]
    lines += [f"- **{fmt.metric_label(m)}**: {fmt.metric_meaning(m)}." for m in metrics]
    test = (
        f"paired randomization test over the same queries, {report.n_resamples:,} resamples"
        if report.study is None
        else "the normal p-value of the label study's interval for the change: below alpha exactly when the "
        "interval excludes 0"
    )
    lines += [
        "- **pp** (percentage points): the plain difference of two percentages, 81.0% − 87.0% = −6.0 pp.",
        f"- **p**: how likely a change at least this large would be if both versions were equally good "
        f"({test}). Below {report.criteria.alpha:g} the change is unlikely to be noise.",
        "- **detectable**: the smallest drop the paired test finds 8 times in 10 with these queries; a limit "
        "smaller than it is checked against noise as much as against the change.",
        "- **labels**: human (qrels, reference answers); LLM (an LLM judge's labels: its bias is not corrected); "
        "PPI (prediction-powered: LLM labels on every query, corrected by the queries people labelled too).",
        "- **error** gates block the merge when they fail; **warning** gates are reported only.",
        "",
        "</details>",
        "",
    ]
    return lines


def render_comment(report: GateReport, max_tags: int = 20) -> str:
    """The Markdown PR comment: verdict first, one sentence per gate, details folded away."""
    blocking = [r for r in report.results if r.blocks]
    warned = [r for r in report.results if not r.passed and not r.blocks]
    moved = [m for m in report.movement if not m.passed]
    lines = _verdict(
        report, [*blocking, *(m for m in moved if m.blocks)], [*warned, *(m for m in moved if not m.blocks)]
    )
    for r in blocking + warned:
        why = f" — {'; '.join(reasons(r))}." if reasons(r) else ""
        lines += [f"**{sentence(r)}**{why}" if r.blocks else f"⚠️ {sentence(r)}{why}", ""]
    lines += [text for m in moved for text in ((f"**{m.sentence()}**" if m.blocks else f"⚠️ {m.sentence()}"), "")]
    lines += (_gate_table(report) if report.results else []) + _movement_table(report)
    lines += [text for line in gate_caveats(report) for text in (f"⚠️ {md_text(line)}", "")]
    lines += _sources_and_power(report) + _sides(report) + _tag_tables(report, max_tags) + _how_to_read(report)
    return "\n".join(lines).rstrip() + "\n"
