"""The trec_eval oracle shared by the parity tests: measure names, pytrec_eval's answer, random inputs.

pytrec_eval is imported inside `ORACLE`, so importing this module costs nothing until an oracle runs.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

# (trec_eval output name, retbench name). pytrec_eval is asked for measures with their default cutoffs
# (P/recall/ndcg_cut/map_cut at 5, 10, 15, 20, 30, ...; success at 1, 5, 10).
CUTS = (5, 10, 15, 20, 30)
PAIRS = [
    *[(f"P_{k}", f"P@{k}") for k in CUTS],
    *[(f"recall_{k}", f"recall@{k}") for k in CUTS],
    *[(f"success_{k}", f"hit@{k}") for k in (1, 5, 10)],
    *[(f"ndcg_cut_{k}", f"ndcg@{k}") for k in CUTS],
    *[(f"map_cut_{k}", f"map@{k}") for k in (5, 10)],
    ("ndcg", "ndcg"),
    ("map", "map"),
    ("recip_rank", "mrr"),
    ("Rprec", "rprec"),
]
REQUEST = {"P", "recall", "success", "ndcg_cut", "map_cut", "ndcg", "map", "recip_rank", "Rprec"}


def ORACLE(qrels, run, measures=None, level=1):
    """pytrec_eval's answer, with one input rewrite that no measure can see.

    pytrec-eval-terrier 0.5.x loops forever (100% CPU, in `evaluate`) on a query whose judgements are
    all non-positive with at least one negative grade, e.g. {"d16": -1}: it then reads memory it never
    set, so whether it loops depends on what the process did before (a fresh process usually passes;
    in a long test run it hung within a few dozen inputs). For such a query a negative grade and a
    grade of 0 mean the same to every measure (judged, not relevant, no relevant document at all), so
    those grades are passed as 0. Queries with a relevant document keep their negative grades, and
    retbench always sees the original qrels. Measured: 30,000 random inputs without a hang, against a
    hang within the first 20 before the rewrite.
    """
    import pytrec_eval

    safe = {
        q: (j if any(g > 0 for g in j.values()) else {d: max(g, 0) for d, g in j.items()}) for q, j in qrels.items()
    }
    return pytrec_eval.RelevanceEvaluator(safe, measures or REQUEST, relevance_level=level).evaluate(run)


DOCS = [f"d{i}" for i in range(25)]  # "d10" < "d2" as strings: tie order is not numeric order


@st.composite
def qrels_and_run(draw):
    n_q = draw(st.integers(1, 8))
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_q):
        qid = f"q{q}"
        judged = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=10, unique=True))
        qrels[qid] = {d: draw(st.integers(-1, 3)) for d in judged}
        answer = draw(st.sampled_from(["full", "full", "full", "missing", "empty"]))
        if answer == "missing":
            continue
        ranked = [] if answer == "empty" else draw(st.lists(st.sampled_from(DOCS), max_size=20, unique=True))
        # quarter steps in [0, 4]: exact in float32, and plenty of ties
        run[qid] = {d: draw(st.integers(0, 16)) / 4.0 for d in ranked}
    # a query the system answered that nobody judged: ignored by both
    run["unjudged"] = {"d1": 1.0}
    return qrels, run


def scifact_overlap_run(scifact, qrels, depth: int = 100) -> dict[str, dict[str, float]]:
    """A real run: every judged query ranked over all of SciFact's documents by an idf-weighted word-overlap
    score, rounded to float32-exact steps (real ties, as BM25 runs on short queries have)."""
    corpus = scifact.corpus
    postings: dict[str, list[int]] = {}
    for i, text in enumerate(corpus.joined_texts()):
        for w in set(text.lower().split()):
            postings.setdefault(w, []).append(i)
    n = len(corpus)
    run: dict[str, dict[str, float]] = {}
    for q in qrels:
        scores = np.zeros(n)
        for w in set(scifact.queries[q].lower().split()):
            docs = postings.get(w)
            if docs:
                scores[docs] += np.log((n + 1) / (len(docs) + 1))
        top = np.argsort(-scores, kind="stable")[:depth]
        run[q] = {corpus.ids[i]: float(np.float32(round(float(scores[i]), 1))) for i in top}
    return run
