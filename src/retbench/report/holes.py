"""Incomplete judgements said out loud: when too few of a system's top documents are judged, the report says so
and shows the measures made for holes beside the usual ones.

judged@k is the share of the top k documents that carry any label (metrics/coverage.py). Pooled or LLM-made
qrels and systems nobody pooled leave holes that every usual measure reads as "not relevant", so their
numbers can be biased low. Below JUDGED_THRESHOLD (0.9) at k = 10, i.e. more than one document in ten of the
top 10 unjudged on average, the report shows for that system:

- bpref (Buckley and Voorhees 2004): ranks relevant documents against judged non-relevant ones only;
- infAP (Yilmaz and Aslam 2006): AP estimated from the judged sample;
- nDCG@10 on the condensed list (Sakai and Kando 2008; trec_eval -J): unjudged documents removed first;
- RBP with p = 0.8 (Moffat and Zobel 2008) and its residual: the most RBP could still rise if every
  unjudged document were relevant.

Each is the stored mean when the study asked for it, else computed from the stored run and the dataset's qrels
with the evaluation's own settings (-J added for the condensed nDCG).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html import escape

from retbench.data import Qrels, Run
from retbench.evaluation import Evaluation, evaluate

JUDGED_K = 10
JUDGED_THRESHOLD = 0.9
JUDGED = f"judged@{JUDGED_K}"
HOLES = f"holes@{JUDGED_K}"  # 1 - judged@k on the same documents: what is computed when neither is stored
# (label shown, metric name, condensed list?)
HOLE_MEASURES: tuple[tuple[str, str, bool], ...] = (
    ("bpref", "bpref", False),
    ("infAP", "infAP", False),
    ("nDCG@10 (condensed, -J)", "ndcg@10", True),
    ("RBP(p=0.8)", "rbp", False),
    ("RBP residual", "rbp_resid", False),
)


@dataclass
class Holes:
    """A system whose top documents are too often unjudged, with the measures made for that."""

    system: str
    judged: float  # mean judged@JUDGED_K over the counted queries
    values: dict[str, float]  # HOLE_MEASURES label -> mean

    def sentence(self) -> str:
        """The warning shown next to the numbers."""
        return (
            f"{self.system}: only {self.judged:.0%} of the top {JUDGED_K} documents are judged (below "
            f"{JUDGED_THRESHOLD:.0%}); unjudged documents count as not relevant, so the usual measures may be too low."
        )


def _means(table: Evaluation, names: list[str]) -> dict[str, float]:
    if not len(table.query_ids):
        return {n: float("nan") for n in names}
    return {n: float(table.values[:, table.metrics.index(n)].mean()) for n in names}


def _judged_share(stored: Mapping[str, float], got: Mapping[str, float]) -> float | None:
    """judged@k as stored, else 1 - holes@k (stored or computed); None when neither is known."""
    if JUDGED in stored:
        return stored[JUDGED]
    holes = stored.get(HOLES, got.get(HOLES))
    return None if holes is None else 1.0 - holes


def find_holes(
    evs: Mapping[str, Evaluation],
    runs: Mapping[str, Run],
    qrels: Qrels | None,
    means: Mapping[str, Mapping[str, float]],
) -> list[Holes]:
    """The systems with judged@10 below the threshold, each with the hole measures (stored means first)."""
    out = []
    for system, ev in evs.items():
        stored = means.get(system, {})
        wanted = [HOLES] + [n for _, n, condensed in HOLE_MEASURES if not condensed and n not in stored]
        if qrels is None:
            got: dict[str, float] = {}
        else:
            judged = [q for q in [*ev.query_ids, *ev.excluded, *ev.skipped] if q in qrels]
            sub = qrels.subset(judged)
            got = _means(evaluate(runs[system], sub, wanted, ev.settings()), wanted)
        share = _judged_share(stored, got)
        if share is None or not share < JUDGED_THRESHOLD:
            continue
        if qrels is not None:
            got |= _means(evaluate(runs[system], sub, ["ndcg@10"], ev.settings(), judged_only=True), ["ndcg@10"])
        values = {
            label: (got[name] if condensed else stored.get(name, got.get(name, float("nan"))))
            for label, name, condensed in HOLE_MEASURES
            if (condensed and name in got) or (not condensed and (name in stored or name in got))
        }
        out.append(Holes(system, float(share), values))
    return out


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
