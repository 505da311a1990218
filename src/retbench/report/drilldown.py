"""Per-query drill-down, gathered from the runs and the dataset behind a results folder, and the curves it shows.

Drill-down: for every counted query, each system's top k (rank, score, grade, a text snippet), the
judged relevant documents it left out of its top k (with the rank it gave them, if any), the query's
value on every metric, how much the primary metric changed against the baseline (the filter for
the most changed queries), and the LLM judge's verdict and reasoning per judged metric where it gave one
(rubric metrics, correctness: `results.read.judge_reasons`). Curves: recall@k, nDCG@k and hit@k for every k from
1 to the run depth, computed by `evaluation.curves.k_curves` (the gatherer, `report.model`, asks for them).

Both need the dataset's qrels (and its texts for snippets): when the dataset cannot be found they are
left out and the report says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retbench.data import Corpus

SNIPPET_CHARS = 200


@dataclass
class Drill:
    """What the HTML drill-down and the curves show (JSON-ready)."""

    k: int
    systems: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)  # order of each query's "values"
    baseline: str | None = None
    primary: str = ""
    queries: list[dict[str, Any]] = field(default_factory=list)
    docs: dict[str, str] = field(default_factory=dict)  # doc id -> snippet
    curves: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # family -> system -> value at k=1..

    def to_json(self) -> dict[str, Any]:
        keys = ("k", "systems", "metrics", "baseline", "primary", "queries", "docs")
        return {key: getattr(self, key) for key in keys}


def _snippet(corpus: Corpus, doc: str) -> str | None:
    i = corpus.index.get(doc)
    if i is None:
        return None
    text = " ".join(corpus.joined(i).split())
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def gather(
    evs: Mapping[str, Any],
    runs: Mapping[str, Any],
    qrels: Mapping[str, Mapping[str, int]],
    corpus: Corpus | None,
    queries: Mapping[str, str],
    *,
    primary: str,
    baseline: str | None,
    k: int = 10,
    reasons: Mapping[str, Mapping[str, Mapping[str, tuple[str, str]]]] | None = None,
) -> Drill:
    """The drill-down of every counted query (see the module docstring); `reasons` is system -> query id ->
    judged metric -> (verdict, reasoning)."""
    systems = list(evs)
    first = evs[systems[0]]
    drill = Drill(k, systems, list(first.metrics), baseline if len(systems) > 1 else None, primary)
    level = first.relevance_level
    cols = {s: {q: i for i, q in enumerate(ev.query_ids)} for s, ev in evs.items()}
    wanted: set[str] = set()
    for qid in first.query_ids:
        judged = dict(qrels.get(qid, {}))
        relevant = [d for d, g in sorted(judged.items(), key=lambda x: -x[1]) if g >= level]
        entry: dict[str, Any] = {"id": qid, "text": queries.get(qid, ""), "values": {}, "top": {}, "missed": {}}
        for s, ev in evs.items():
            row = cols[s].get(qid)
            # null: the metric does not apply to this query (an answer metric on an unanswerable question)
            entry["values"][s] = None if row is None else [None if v != v else float(v) for v in ev.values[row]]
            ranking = runs[s].ranking(qid) if qid in runs[s] else []
            entry["top"][s] = [[d, float(sc), judged.get(d)] for d, sc in ranking[:k]]
            pos = {d: r for r, (d, _) in enumerate(ranking, start=1)}
            entry["missed"][s] = [[d, judged[d], pos.get(d)] for d in relevant if pos.get(d, k + 1) > k]
            wanted.update(d for d, _ in ranking[:k])
            said = ((reasons or {}).get(s) or {}).get(qid)
            if said:
                entry.setdefault("reasons", {})[s] = [[m, verdict, why] for m, (verdict, why) in said.items()]
        wanted.update(relevant)
        if baseline in evs and primary in first.metrics:
            j = first.metrics.index(primary)
            base = entry["values"][baseline]
            deltas = [
                v[j] - base[j]
                for s, v in entry["values"].items()
                if s != baseline and v and base and v[j] is not None and base[j] is not None
            ]
            entry["change"] = max(deltas, key=abs) if deltas else 0.0
        drill.queries.append(entry)
    if corpus is not None:
        for d in wanted:
            snip = _snippet(corpus, d)
            if snip is not None:
                drill.docs[d] = snip
    return drill
