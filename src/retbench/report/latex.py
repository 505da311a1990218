"""Tables for papers: a booktabs LaTeX table of systems x metrics with the best value bold and significance marks.

The convention follows the one readers of IR papers know from ranx's `Report.to_latex`: each system gets a
letter (a, b, c, ... in the first column) and a value carries, as a superscript, the letters of the systems it
is significantly better than on that metric. "Significantly" means the paired randomization test's p-value,
corrected across every (pair, metric) test of the comparison (Holm), is at most alpha. Only the pairs the
comparison tested can carry marks: against the baseline by default, every pair with `--all-pairs`.
The best mean per metric (lowest where lower is better), compared at the printed precision so that printed
ties are all bold, is in bold face. The caption names the test, the correction, alpha and the resamples.
System and metric names are user text and are escaped, so the table compiles whatever they hold.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from retbench.comparison import Comparison
from retbench.metrics.registry import lower_is_better

if TYPE_CHECKING:
    from retbench.report.model import ReportData

_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}

_TESTS = {"randomization": "paired randomization test", "t": "paired t-test", "wilcoxon": "Wilcoxon signed-rank test"}


def escape(text: str) -> str:
    """`text` as LaTeX prints it verbatim (the ten special characters, and < > which OT1 prints wrongly)."""
    return "".join(_ESCAPES.get(c, c) for c in text)


def letter(i: int) -> str:
    """The mark of the i-th system: a..z, then a1..z1, and so on (never empty, never a LaTeX special)."""
    base = string.ascii_lowercase[i % 26]
    return base if i < 26 else f"{base}{i // 26}"


def significant_wins(comparison: Comparison | None, alpha: float | None = None) -> dict[tuple[str, str], set[str]]:
    """(system, metric) -> the systems it is significantly better than, from the corrected randomization p-values.

    A pair (A, B) tests B - A; B beats A when the delta points the metric's better way and `m.p` <= alpha."""
    out: dict[tuple[str, str], set[str]] = {}
    if comparison is None:
        return out
    level = comparison.alpha if alpha is None else alpha
    for pair in comparison.pairs:
        for m in pair.metrics:
            if not (m.p <= level) or m.delta == 0:
                continue
            b_better = (m.delta < 0) if lower_is_better(m.metric) else (m.delta > 0)
            winner, loser = (pair.system_b, pair.system_a) if b_better else (pair.system_a, pair.system_b)
            out.setdefault((winner, m.metric), set()).add(loser)
    return out


def best_systems(
    systems: Sequence[str], means: Mapping[str, Mapping[str, float]], metric: str, digits: int
) -> set[str]:
    """The systems whose printed mean on `metric` is the best printed one (ties all count)."""
    shown = {s: round(means[s][metric], digits) for s in systems if _finite(means[s].get(metric))}
    if not shown:
        return set()
    best = min(shown.values()) if lower_is_better(metric) else max(shown.values())
    return {s for s, v in shown.items() if v == best}


def _finite(v: float | None) -> bool:
    return v is not None and v == v and abs(v) != float("inf")


def latex_table(
    systems: Sequence[str],
    means: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str],
    comparison: Comparison | None = None,
    *,
    digits: int = 4,
    label: str = "tab:retbench",
    what: str = "",
) -> str:
    """The table (a `table` float holding a booktabs `tabular`); needs `\\usepackage{booktabs}` in the preamble.

    `means[system][metric]` are the values printed; a missing one prints as a dash. `what` is said first in
    the caption (the dataset, say)."""
    letters = {s: letter(i) for i, s in enumerate(systems)}
    wins = significant_wins(comparison)
    best = {m: best_systems(systems, means, m, digits) for m in metrics}
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\caption{" + _caption(comparison, what) + "}",
        r"\label{" + escape(label) + "}",
        r"\begin{tabular}{cl" + "r" * len(metrics) + "}",
        r"\toprule",
        " & ".join([r"\#", "System", *(escape(m) for m in metrics)]) + r" \\",
        r"\midrule",
    ]
    for s in systems:
        cells = [letters[s], escape(s)]
        for m in metrics:
            v = means[s].get(m)
            if not _finite(v):
                cells.append("--")
                continue
            text = f"{v:.{digits}f}"
            cell = r"\textbf{" + text + "}" if s in best[m] else text
            beaten = "".join(letters[o] for o in systems if o in wins.get((s, m), set()))
            cells.append(cell + (f"$^{{{beaten}}}$" if beaten else ""))
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def _caption(comparison: Comparison | None, what: str) -> str:
    head = (escape(what.rstrip(".")) + ". ") if what else ""
    head += "Best value per metric in bold."
    if comparison is None:
        return head + " No significance test was made."
    test = _TESTS["randomization"]
    pairs = "each pair of systems" if len({p.system_a for p in comparison.pairs}) > 1 else "the baseline"
    if pairs == "the baseline":
        pairs = f"the baseline ({escape(comparison.pairs[0].system_a)})"
    return (
        f"{head} A superscript lists the systems a value is significantly better than "
        f"({test}, {comparison.n_resamples:,} resamples, {escape(comparison.correction.capitalize())}-corrected "
        f"over {comparison.family} tests, $\\alpha = {comparison.alpha:g}$); tested against {pairs} on "
        f"{', '.join(escape(m) for m in comparison.metrics)}."
    )


def report_latex(data: ReportData, *, digits: int = 4) -> str:
    """The report's systems x metrics (every metric it shows) with the marks of its baseline comparison."""
    ok = [s for s in data.systems if s.error is None]
    what = data.title or ", ".join(str(d.get("name", "")) for d in data.datasets if d.get("name"))
    return latex_table(
        [s.name for s in ok], {s.name: s.means for s in ok}, data.metrics, data.comparison, digits=digits, what=what
    )


def comparison_latex(comparison: Comparison, *, digits: int = 4) -> str:
    """A `retbench compare` result as a table: the systems in the order compared, the metrics tested."""
    means: dict[str, dict[str, float]] = {}
    for pair in comparison.pairs:
        for m in pair.metrics:
            means.setdefault(pair.system_a, {})[m.metric] = m.mean_a
            means.setdefault(pair.system_b, {})[m.metric] = m.mean_b
    return latex_table(list(means), means, comparison.metrics, comparison, digits=digits)
