"""A nightly series' level with an anytime-valid sequence over its runs, failed runs left out and said."""

from __future__ import annotations

import numpy as np

from retbench.report.history import sequence_lines
from retbench.results.history_read import Entry
from retbench.sequential import betting_cs

DATASET = {"name": "scifact", "split": "test"}


def nightly(run: int, value: float | None) -> Entry:
    e = Entry(run, f"2026-01-{run:02d}T02:00:00", "nightly", "out", "h", "abc123", False, None, None, [DATASET])
    e.points["bm25@scifact"] = ("bm25", DATASET)
    if value is None:
        e.coverage["bm25@scifact"] = {"answered": 0, "judged": 300, "failed": 300}
    else:
        e.scores["bm25@scifact"] = {"ndcg@10": (value, value - 0.02, value + 0.02)}
        e.coverage["bm25@scifact"] = {"answered": 300, "judged": 300}
    return e


def test_each_series_gets_the_betting_sequence_of_its_runs_values_in_time_order():
    values = np.random.default_rng(1).normal(0.68, 0.01, size=30).clip(0, 1)
    runs = [nightly(i + 1, float(v)) for i, v in enumerate(values)]
    runs.insert(10, nightly(99, None))  # a failed night: no number, not an observation
    (line,) = sequence_lines(runs, "ndcg@10")
    seq = betting_cs(values, (0.0, 1.0))
    _, low, high = seq.at(30)
    assert line.startswith(f"bm25: level {values.mean():.4f}, 95% confidence sequence")
    assert f"[{low:.4f}, {high:.4f}] over 30 runs" in line
    assert "may be looked at after every run" in line
