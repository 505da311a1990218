"""Incomplete judgements said out loud, rendered: the warning and the table of the measures made for holes.

Which systems have holes, and the values, come from `results/caveats.py` (the gate needs them too).
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from retbench.results.caveats import HOLE_MEASURES, JUDGED, Holes

_EXPLAINED = (
    "bpref and infAP use judged documents only; the condensed nDCG@10 removes unjudged documents first "
    "(trec_eval -J); RBP is trec_eval's rbp_p=0.8, graded (a relevant document gains its grade over the query's "
    "top grade; ir_measures' RBP(p=0.8) counts every relevant document as 1); the RBP residual is how much RBP "
    "could still rise if every unjudged document were relevant."
)
#: said when the qrels judge only relevant documents: two of the columns then repeat other metrics
RELEVANT_ONLY = (
    "These qrels judge no document below the relevance level (only relevant documents are listed), so a judged "
    "document is a relevant one: judged@10 equals P@10 and bpref equals recall, and they are no extra evidence "
    "about the holes."
)


def holes_markdown(holes: list[Holes], text: Callable[[str], str] = str) -> list[str]:
    """The warning lines and a table of the hole measures, for the Markdown report and the PR comment.

    `text` escapes user text (system names) for the Markdown at hand."""
    if not holes:
        return []
    lines = ["## Incomplete judgements", ""]
    lines += [f"> **Warning** {text(h.sentence())}" for h in holes]
    labels = [label for label, _, _ in HOLE_MEASURES]
    lines += ["", "| system | judged@10 | " + " | ".join(labels) + " |", "|---" * (len(labels) + 2) + "|"]
    for h in holes:
        cells = [f"{h.values[lab]:.4f}" if lab in h.values else "—" for lab in labels]
        lines.append(f"| {text(h.system)} | {h.judged:.4f} | " + " | ".join(cells) + " |")
    lines += ["", _EXPLAINED]
    if any(h.relevant_only for h in holes):
        lines.append(RELEVANT_ONLY)
    return [*lines, ""]


def holes_html(holes: list[Holes]) -> str:
    """The same warning and table for the HTML report (shown right after the summary table)."""
    if not holes:
        return ""
    labels = [label for label, _, _ in HOLE_MEASURES]
    head = "".join(f"<th>{escape(x)}</th>" for x in ["system", JUDGED, *labels])
    rows = "".join(
        f"<tr><td>{escape(h.system)}</td><td class=num>{h.judged:.4f}</td>"
        + "".join(f"<td class=num>{h.values[lab]:.4f}</td>" if lab in h.values else "<td>—</td>" for lab in labels)
        + "</tr>"
        for h in holes
    )
    warn = "".join(f'<p class="note warn" data-holes="{escape(h.system)}">{escape(h.sentence())}</p>' for h in holes)
    table = f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'
    notes = f'<p class="note">{escape(_EXPLAINED)}</p>'
    if any(h.relevant_only for h in holes):
        notes += f'<p class="note">{escape(RELEVANT_ONLY)}</p>'
    return f'<div class="holes">{warn}{table}{notes}</div>'
