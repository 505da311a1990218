"""Watching a paired nDCG@10 difference after every query: false alarms and queries to detect a drop.

Per-query nDCG@10 of two BM25 settings on the SciFact test split (300 queries) is computed once; streams
are then resampled from those real per-query values (seeded), and each stream is watched after every query:

* null streams: each drawn query's delta d = b - a with a random sign (the two systems swapped at random),
  so the true mean difference is exactly 0. A false alarm is any look at which the interval excludes 0.
* drop streams: d - mean(d) - 0.02 (clipped to [-1, 1]; the true mean after clipping is printed), a true
  2-point drop. Detection is the first look whose interval lies wholly below 0.

Watched are retbench's anytime-valid betting sequence (`retbench.sequential.diff_cs`, alpha 0.05), with the
paper's bet schedule ("default") and with bets tuned to n_fixed ("planned", `t_opt`: a number fixed before
the stream starts, as a power analysis gives it; still valid at every look), and, for
contrast, the fixed-sample 95% normal interval looked at after every query from the 10th on. The fixed-size
test it is compared with is the two-sided z-test at 5% with 80% power for a 0.02 drop at the drop streams'
standard deviation: n_fixed = ((z_0.975 + z_0.8) sd / 0.02)^2 queries, looked at once. Reported: the false-
alarm rates, the sequence's mean stopping time (an undetected stream counts as the horizon, 4 n_fixed) and
the number of queries by which 80% of drop streams were detected (n_80), each over n_fixed.

    .venv/bin/python benchmarks/sequential_simulation.py [--streams 1000] [--seed 0] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from retbench.evaluation import evaluate
from retbench.io.beir import read_beir
from retbench.retrievers import create
from retbench.sequential import diff_cs
from retbench.stats.paired import z_quantile

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = {
    "a": {"k1": 1.2, "b": 0.75, "stopwords": "en", "stemmer": "english"},
    "b": {"k1": 0.9, "b": 0.4, "stopwords": "en", "stemmer": None},
}
DROP = 0.02
ALPHA = 0.05


def per_query_ndcg(queries_limit: int | None) -> tuple[np.ndarray, np.ndarray]:
    """nDCG@10 per test query of the two BM25 settings (same query order)."""
    ds = read_beir(ROOT / "corpora" / "scifact")
    qrels = ds.split("test")
    qids = list(qrels)[:queries_limit]
    qrels = {q: qrels[q] for q in qids}
    out = []
    for params in SYSTEMS.values():
        r = create("bm25s", params)
        r.index(ds.corpus)
        run = r.search(ds.queries.subset(qids), 10)
        out.append(evaluate(run, qrels, ["ndcg@10"]).values[:, 0])
    return out[0], out[1]


def fixed_misses(d: np.ndarray, truth: float) -> bool:
    """Whether a fixed 95% normal interval, looked at after every value from the 10th, ever misses `truth`."""
    t = np.arange(1, d.size + 1)
    mean = np.cumsum(d) / t
    var = np.maximum(np.cumsum(d * d) / t - mean**2, 0.0) * t / np.maximum(t - 1, 1)
    half = z_quantile(1 - ALPHA / 2) * np.sqrt(var / t)
    return bool(np.any(((mean - half) > truth)[9:] | ((mean + half) < truth)[9:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true", help="60 queries, 20 streams: a smoke test")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    streams = 20 if args.tiny else args.streams
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()

    a, b = per_query_ndcg(60 if args.tiny else None)
    d = b - a
    alt = np.clip(d - d.mean() + (-DROP), -1.0, 1.0)
    sd = float(alt.std(ddof=1))
    n_fixed = math.ceil(((z_quantile(1 - ALPHA / 2) + z_quantile(0.8)) * sd / DROP) ** 2)
    horizon = 4 * n_fixed

    plans = {"default": None, "planned": n_fixed}  # the paper's bet schedule; bets tuned to n_fixed
    false_cs = dict.fromkeys(plans, 0)
    stops = {p: np.full(streams, horizon, dtype=np.int64) for p in plans}
    false_fixed = fixed_power = 0
    zeros = np.zeros(horizon)
    for s in range(streams):
        null = d[rng.integers(0, d.size, horizon)] * rng.choice([-1.0, 1.0], horizon)
        drop = alt[rng.integers(0, alt.size, horizon)]
        for plan, t_opt in plans.items():
            false_cs[plan] += diff_cs(zeros, null, (0.0, 1.0), ALPHA, t_opt=t_opt).first_excluding(0.0) is not None
            below = np.flatnonzero(diff_cs(zeros, drop, (0.0, 1.0), ALPHA, t_opt=t_opt).high < 0.0)
            if below.size:
                stops[plan][s] = below[0] + 1
        false_fixed += fixed_misses(null, 0.0)
        head = drop[:n_fixed]
        fixed_power += head.mean() + z_quantile(1 - ALPHA / 2) * head.std(ddof=1) / math.sqrt(n_fixed) < 0

    def watched(plan: str) -> dict[str, float]:
        st = stops[plan]
        n80 = int(np.quantile(st, 0.8, method="higher"))
        return {
            "false_alarm": false_cs[plan] / streams,
            "detected_by_horizon": float(np.mean(st < horizon)),
            "mean_stop": float(st.mean()),
            "mean_stop_over_n_fixed": float(st.mean() / n_fixed),
            "n80": n80,
            "n80_over_n_fixed": n80 / n_fixed,
        }

    figures = {
        "systems": SYSTEMS,
        "queries": int(d.size),
        "observed_mean_delta": float(d.mean()),
        "true_drop": float(alt.mean()),
        "sd": sd,
        "streams": streams,
        "seed": args.seed,
        "horizon": horizon,
        "false_alarm_fixed_watched": false_fixed / streams,
        "n_fixed": n_fixed,
        "fixed_power_at_n_fixed": fixed_power / streams,
        **{f"sequence_{plan}": watched(plan) for plan in plans},
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
