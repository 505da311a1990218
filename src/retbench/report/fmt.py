"""Number and name formatting shared by the PR comment, Markdown, HTML and terminal output.

One place decides how a metric reads to a person, so "81.0%" and "-6.0 pp" look the same in every
renderer. Shares (the registry row's `unit`: recall, precision, hit rate) read as percentages and their
differences as percentage points; scores (MRR, nDCG, MAP, ...) read as decimals.
"""

from __future__ import annotations

import math
import re

from retbench.metrics.base import MetricRow, row_of
from retbench.metrics.registry import lookup

# where a metric's own name ends in a written name: a cutoff (`@10`, trec_eval's `_10` / `.10`) or parameters
_SUFFIX = re.compile(r"[@(._]")


def _split(metric: str) -> tuple[str, str, str]:
    """(label, meaning template, the rest as written) from the registry row the name's longest head names.

    `ndcg_cut_10` -> the nDCG row and `_10`; `recall_all@5` -> the recall_all row and `@5`; a name no row
    declares (a plugin's without a label, a column such as `latency`) keeps its spelling.
    """
    row, cut = _row(metric)
    if row is not None:
        label = row.label or metric[:cut]
        meaning = row.meaning or row.description
        return label, meaning, metric[cut:]
    return metric, "", ""


def _row(metric: str) -> tuple[MetricRow | None, int]:
    """The registry row the longest head of `metric` names, and where that head ends (None, 0: no row)."""
    cuts = [m.start() for m in _SUFFIX.finditer(metric)] + [len(metric)]
    for cut in sorted(set(cuts), reverse=True):
        found = lookup(metric[:cut]) if cut else None
        if found is not None:
            return row_of(found), cut
    return None, 0


def is_share(metric: str) -> bool:
    """Whether the registry row says the metric is a share (recall, precision, hit rate): printed as a percentage.

    Scores (MRR, nDCG, MAP, and names no row declares) print as decimals: 0.531, not 53.1%.
    """
    row, _ = _row(metric)
    return row is not None and row.unit == "share"


def value(metric: str, v: float | None) -> str:
    """A metric's value in its unit: recall 0.87 -> '87.0%', MRR 0.531 -> '0.531'."""
    return pct(v) if is_share(metric) else num(v, 3)


def change(metric: str, d: float | None) -> str:
    """A change of a metric in its unit, signed: recall -0.06 -> '-6.0 pp', MRR -0.06 -> '-0.060'."""
    return pp(d) if is_share(metric) else signed(d, 3, "n/a")


def size(metric: str, d: float) -> str:
    """A size of change without its sign: recall 0.03 -> '3.0 pp', nDCG 0.03 -> '0.030'."""
    return change(metric, abs(d)).lstrip("+±")


def metric_label(metric: str) -> str:
    """How reports name a metric, from its registry row: `mrr@10` -> `MRR@10`, `ndcg_cut_10` -> `nDCG_10`."""
    label, _, rest = _split(metric)
    return f"{label}{rest}"


def metric_meaning(metric: str) -> str:
    """One plain-English sentence a reviewer who is not an ML engineer can read (the registry row's meaning)."""
    _, meaning, rest = _split(metric)
    k = re.match(r"[@_.](\d+|k)\b", rest)
    return meaning.format(k=k[1] if k else "N") if meaning else "see the metric registry for its definition"


def pct(value: float | None, digits: int = 1) -> str:
    """0.87 -> '87.0%'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100.0 * value:.{digits}f}%"


def pp(delta: float | None, digits: int = 1) -> str:
    """-0.06 -> '-6.0 pp' (always signed; '±0.0 pp' when it rounds to zero)."""
    if delta is None or math.isnan(delta):
        return "n/a"
    text = f"{100.0 * delta:+.{digits}f}"
    if float(text) == 0.0:
        text = "±" + text[1:]
    return f"{text} pp"


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def num(value: float | None, digits: int = 4, missing: str = "n/a") -> str:
    """0.81234 -> '0.8123'; `missing` stands for None, NaN and infinities."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return f"{value:.{digits}f}"


#: what a mean over no query reads as: never "nan", and never beside an interval
NO_SCORE = "n/a (no query scored)"


def finite(value: float | None) -> bool:
    """A number that can be shown (not None, NaN or an infinity)."""
    return not _missing(value)


def interval(low: float | None, high: float | None, digits: int = 4) -> str:
    """'[0.6285, 1.0000]'; '' when either bound is missing."""
    if _missing(low) or _missing(high):
        return ""
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def mean_ci(mean: float | None, ci: tuple[float, float] | None = None, digits: int = 4) -> str:
    """'0.8123 [0.7000, 0.9000]'. A missing mean reads `NO_SCORE` and never carries an interval: an
    interval beside no number would read as a measured range."""
    if _missing(mean):
        return NO_SCORE
    bounds = interval(*ci, digits=digits) if ci else ""
    return f"{mean:.{digits}f}" + (f" {bounds}" if bounds else "")


def signed(value: float | None, digits: int = 4, missing: str = "–") -> str:
    """A difference: 0.012 -> '+0.0120', an exact zero -> '0' (nothing changed), None/NaN/inf -> `missing`."""
    if _missing(value):
        return missing
    assert value is not None
    return "0" if value == 0 else f"{value:+.{digits}f}"


def p_short(p: float | None) -> str:
    """'0.003', '0.049', '0.28', '<0.001': three decimals below 0.1 so 0.049 never reads as 0.05."""
    if p is None or math.isnan(p):
        return "n/a"
    if p < 0.001:
        return "<0.001"
    return f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def pvalue(p: float | None) -> str:
    """'p = 0.003', 'p = 0.28', 'p < 0.001' (never 'p = 0')."""
    short = p_short(p)
    return f"p {short[0]} {short[1:]}" if short.startswith("<") else f"p = {short}"


def judged(n: int, total: int) -> str:
    """'judged 20 of 22': verdicts that scored of the queries an LLM-judged metric applies to."""
    return f"judged {n} of {total}"


def applicable(n: int, total: int) -> str:
    """'6 of 28': the queries a metric applies to (answer metrics skip questions they do not concern)."""
    return f"{n} of {total}"


def coverage(answered: int, total: int) -> str:
    """'scored 298 of 300' — every mean is shown next to how many queries it stands on."""
    return f"scored {answered} of {total}"


def count(value: int | None, missing: str = "n/a") -> str:
    """12345 -> '12,345'."""
    return missing if value is None else f"{int(value):,}"


def ms(seconds: float | None, digits: int = 1) -> str:
    """Seconds as milliseconds: 0.0123 -> '12.3'."""
    return num(None if seconds is None else 1000.0 * seconds, digits)


def counted(n: int, one: str, many: str) -> str:
    """3, 'query', 'queries' -> '3 queries'; 1 -> '1 query'."""
    return f"{n} {one if n == 1 else many}"


def unpaired(reasons: dict[str, str]) -> str | None:
    """The note for metrics a comparison could not pair (comparison.PairComparison.unpaired), None if none."""
    if not reasons:
        return None
    return "Not compared: " + "; ".join(f"{metric_label(m)}: {why}" for m, why in reasons.items())
