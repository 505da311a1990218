"""`benchmarks/stores.py`'s comparison table ranks the stores with their nDCG@10 rank interval, marks those tied for
first and says what the interval is; with two systems it adds no interval (their paired comparison settles them)."""

from __future__ import annotations

import importlib.util

import numpy as np

from repo_paths import ROOT
from retbench.data import Run
from retbench.evaluation import evaluate
from retbench.resolution import rank_intervals
from trec_oracle import scifact_overlap_run


def _table_module():
    spec = importlib.util.spec_from_file_location("stores_benchmark", ROOT / "benchmarks" / "stores.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_store_table_shows_each_systems_rank_interval_from_its_per_query_ndcg(scifact):
    qrels = {q: j for q, j in list(scifact.split("test").to_dict().items())[:80]}
    base = scifact_overlap_run(scifact, qrels, depth=20)
    rng = np.random.default_rng(7)
    runs = {
        "exact": base,
        "reversed": {q: {d: -s for d, s in docs.items()} for q, docs in base.items()},
        "shuffled": {q: {d: float(rng.random()) for d in docs} for q, docs in base.items()},
    }
    rows = []
    for name, run in runs.items():
        ev = evaluate(Run.from_dict(run, name=name), qrels, ["ndcg@10", "recall@10"], system=name)
        means = ev.means()
        lat = {"p50": 1.0, "p99": 2.0, "qps": 100.0}
        rows.append({"name": name, "ev": ev, "ndcg": means["ndcg@10"], "recall": means["recall@10"], "overlap": None,
                     "filtered": None, "docs_s": 1.0, "build_s": None, "size_mb": None, "one": lat, "eight": lat})  # fmt: skip
    stores = _table_module()
    text = stores.table(rows, rows[0])
    want = rank_intervals(np.column_stack([r["ev"].column("ndcg@10") for r in rows]), list(runs), n_resamples=2000)
    for name in runs:
        line = next(x for x in text.splitlines() if x.startswith(f"| {name} |"))
        tied = " (tied 1st)" if len(want.tied_first) > 1 and name in want.tied_first else ""
        assert line.split(" | ")[2] == want.interval(name) + tied, line
    assert "Rank interval: the 95% range" in text
    two = stores.table(rows[:2], rows[0])
    assert all(x.split(" | ")[2] == "—" for x in two.splitlines()[2:4]) and "Rank interval" not in two
