"""Lines that state a label study's answer (`studies.labels.answer.estimate_study`'s dict), for the terminal,
`retbench compare --labels` and the gate: the decision first ("B beats A by x [lo, hi]" only when the interval
excludes 0), then each system with where its number comes from (PPI with n human / n LLM labels, human labels
alone, or LLM labels with the judge's bias uncorrected), its judged share of the top k, rank intervals when
there are more than two systems, and the same incomplete-judgements caveat as every other report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retbench.results.caveats import JUDGED_THRESHOLD


def label_source(block: Mapping[str, Any], k: int) -> str:
    """Where a number comes from: 'PPI, 40 human / 236 LLM labels, judged@10 0.97' (the gate says it too)."""
    kind = block.get("estimate")
    judged = f"judged@{k} {block.get('judged', 0.0):.2f}" if "judged" in block else ""
    if kind == "PPI":
        head = f"PPI, {block['n_human']:,} human / {block['n_llm']:,} LLM labels"
    elif kind == "human":
        head = f"human labels, {block['n_human']:,}"
    else:
        head = f"LLM labels ({block.get('n_llm', 0):,}), judge bias uncorrected: no human labels yet"
    clipped = f"clipped to {block['clipped']}" if block.get("clipped") else ""
    return ", ".join(x for x in (head, judged, clipped) if x)


def _means_indicative(systems: Mapping[str, Any]) -> bool:
    """Whether per-system intervals rest on a queue chosen for the difference (any PPI estimate: part of the
    queries labelled). In the label-study simulation such a mean's 95% interval covered 0.74-0.93 of the time
    below 15% labelled on SciFact and 0.74-0.89 up to 30% on the chunking set; B − A's held its level."""
    return any(block.get("estimate") == "PPI" for block in systems.values())


def _interval(block: Mapping[str, Any]) -> str:
    low, high = block.get("low"), block.get("high")
    if low is None or high is None or low != low:  # NaN: too few queries for an interval
        return f"{block['mean']:.4f}"
    return f"{block['mean']:.4f} [{low:.4f}, {high:.4f}]"


def answer_lines(answer: Mapping[str, Any], k: int = 10) -> list[str]:
    """The study's answer as plain lines (metric values to 4 decimals)."""
    metric, estimand = answer["metric"], answer.get("estimand", "population")
    lines = []
    diff = answer.get("difference")
    systems = answer["systems"]
    if diff:
        a, b = diff["a"], diff["b"]
        judged = min(systems[a].get("judged", 0.0), systems[b].get("judged", 0.0))
        src = label_source({**diff, "judged": judged}, k)
        low, high, mean = diff.get("low"), diff.get("high"), diff["mean"]
        if low is not None and low == low and low > 0:
            lines.append(f"{b} beats {a} by {mean:.4f} [{low:.4f}, {high:.4f}] {metric} ({src})")
        elif high is not None and high == high and high < 0:
            lines.append(f"{a} beats {b} by {-mean:.4f} [{-high:.4f}, {-low:.4f}] {metric} ({src})")
        else:
            lines.append(f"no clear winner: {b} − {a} = {_interval(diff)} {metric}, the interval holds 0 ({src})")
    for name, block in systems.items():
        lines.append(f"{name}: {metric} {_interval(block)} ({label_source(block, k)})")
    if diff and _means_indicative(systems):
        lines.append(
            f"Each system's own interval is indicative: the labelling queue was chosen for {diff['b']} − {diff['a']}, "
            "and until every query is labelled such intervals covered the truth only 74-93% of the time in "
            "simulation (docs/howto/label-study.md); the difference's interval holds its level."
        )
    ranks = answer.get("ranks")
    if ranks:
        lines.append(
            "rank intervals: "
            + ", ".join(f"{n} {lo}-{hi}" if lo != hi else f"{n} {lo}" for n, (lo, hi) in ranks.items())
        )
    what = "the population the logged queries were drawn from" if estimand == "population" else "the logged queries"
    lines.append(f"{1 - answer.get('alpha', 0.05):.0%} intervals for the mean over {what}.")
    for name, block in systems.items():
        if block.get("judged", 1.0) < JUDGED_THRESHOLD:
            lines.append(
                f"{name}: only {block['judged']:.0%} of the top {k} documents carry a label (below {JUDGED_THRESHOLD:.0%}); "
                "unlabelled documents count as not relevant, so its numbers may be too low: run `retbench label prelabel`."
            )
    waiting = (answer.get("labels") or {}).get("waiting")
    if waiting:
        lines.append(
            f"{waiting} fully labelled queries wait for an earlier query in the queue and are not counted yet."
        )
    return lines
