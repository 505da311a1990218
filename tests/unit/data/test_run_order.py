"""A Run puts every query into trec_eval order (score descending, equal scores by doc id descending) and keeps
the first of a repeated doc id; the vectorised checks that skip the work for runs already in order must give
exactly what the plain definition gives, in order or not, with ties, repeats and NaN scores."""

from __future__ import annotations

import math
import random
from itertools import groupby

import numpy as np

from retbench.data import Run


def _trec_order(pairs: list[tuple[str, float]]) -> list[tuple[str, float]]:
    seen: set[str] = set()
    first = [(d, s) for d, s in pairs if not (d in seen or seen.add(d))]
    by_score = sorted(first, key=lambda p: (math.isnan(p[1]), 0.0 if math.isnan(p[1]) else -p[1]))  # stable
    out: list[tuple[str, float]] = []
    for nan, group in groupby(by_score, key=lambda p: math.isnan(p[1])):
        if nan:  # NaN equals nothing: no tie to break, input order kept
            out.extend(group)
            continue
        for _, tied in groupby(list(group), key=lambda p: p[1]):
            out.extend(sorted(tied, key=lambda p: p[0], reverse=True))
    return out


def test_runs_in_order_or_not_come_out_in_trec_eval_order():
    rng = random.Random(0)
    for trial in range(3000):
        lens = [rng.randint(0, 7) for _ in range(rng.randint(1, 6))]
        pool = [1.0, 2.0, 3.0, float("nan"), 0.5, -1.0] if trial % 3 else [1.0, 2.0]
        rankings = []
        for n in lens:
            scores = [rng.choice(pool) for _ in range(n)]
            if trial % 4 == 0:
                scores.sort(reverse=True)  # sorted input: the no-sort path, ties only
            rankings.append([(f"d{rng.randint(0, 9)}", s) for s in scores])
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        docs = np.array([d for r in rankings for d, _ in r], dtype=object)
        scores = np.array([s for r in rankings for _, s in r], dtype=np.float64)
        run = Run([f"q{i}" for i in range(len(lens))], offsets, docs, scores)
        for i, ranking in enumerate(rankings):
            span = run.span(f"q{i}")
            got = list(zip(run.doc_ids[span].tolist(), run.scores[span].tolist(), strict=True))
            want = _trec_order(ranking)
            assert [d for d, _ in got] == [d for d, _ in want], (ranking, got)
            assert np.array_equal(np.array([s for _, s in got]), np.array([s for _, s in want]), equal_nan=True)
