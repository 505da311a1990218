"""Incomplete judgements said out loud, rendered: the warning and the table of the measures made for holes.

Which systems have holes, and the values, come from `results/caveats.py` (the gate needs them too).
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from retbench.results.caveats import HOLE_MEASURES, JUDGED, Holes


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
    lines += [
        "",
        "bpref and infAP use judged documents only; the condensed nDCG@10 removes unjudged documents first "
        "(trec_eval -J); the RBP residual is how much RBP could still rise if every unjudged document were relevant.",
        "",
    ]
    return lines


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
    return f'<div class="holes">{warn}{table}</div>'
