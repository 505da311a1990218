"""Does the label study's active PPI interval hold, and does choosing the pairs save labels? A simulation.

SciFact's test and train queries carry full human judgements, so the qrels play the people and the
full-qrels value of nDCG@10 (B − A, and each system's mean, over the logged queries) is the truth. Two BM25
variants (bm25s, Lucene scoring; A without stemming, B with the Snowball stemmer) are pooled at depth 10,
exactly as `retbench label init` pools (`study.pool_pairs`). A simulated LLM judge grades every pooled pair
by a known confusion matrix (its grade g' drawn from row P(g' | true grade g)), and reports calibrated
grade probabilities: the posterior P(g | g') under the pool's base rate. Each repetition draws new judge
grades and a new queue, then labels the queue up to each budget (a share of the pooled pairs) with the
study's own code (`active.sampling_weights`, `queue_keys`, `queue_threshold`, `active_mean` with tuned λ,
`pool_scores.uncertainty` for u_q), once with the active weights and once with uniform weights.

    flock /tmp/retbench-heavy.lock .venv/bin/python benchmarks/label_simulation.py            # 200 repetitions
    .venv/bin/python benchmarks/label_simulation.py --tiny                                     # a smoke test

Printed per judge, sampler and budget: coverage of the full-qrels truth by the 95% `logged` interval (and
of the pooled-labels truth), mean half-width, mean human-labelled pairs; then the goals' verdicts.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from retbench.active import active_mean, inclusion, queue_keys, queue_threshold, sampling_weights
from retbench.api import evaluate
from retbench.io.datasets import load_dataset
from retbench.retrievers import create
from retbench.studies.labels import pool_scores as ps
from retbench.studies.labels.answer import MIX
from retbench.studies.labels.study import pool_pairs

ROOT = Path(__file__).resolve().parents[1]
JUDGES = {  # P(judge grade | true grade), rows: true grade 0, 1
    "good": np.array([[0.95, 0.05], [0.10, 0.90]]),
    "mediocre": np.array([[0.80, 0.20], [0.35, 0.65]]),
    "useless": np.array([[0.50, 0.50], [0.50, 0.50]]),
}
SYSTEMS = {
    "A": {"k1": 1.2, "b": 0.75, "method": "lucene", "stopwords": "en", "stemmer": None},
    "B": {"k1": 1.2, "b": 0.75, "method": "lucene", "stopwords": "en", "stemmer": "english"},
}
K = 10
METRIC = "ndcg@10"


def dataset_path() -> Path:
    for base in (ROOT / "corpora" / "scifact", Path("/work/shared/corpora/scifact")):
        if (base / "qrels").is_dir():
            return base
    raise SystemExit("SciFact is not under corpora/scifact")


def setup(max_queries: int | None) -> dict:
    """Runs, pool, true grades and both truths (full qrels, pooled labels)."""
    ds = load_dataset(dataset_path(), ["test", "train"])
    qrels = {q: dict(docs) for split in ("test", "train") for q, docs in ds.split(split).to_dict().items()}
    qids = [q for q in qrels if q in ds.queries][:max_queries]
    queries = ds.queries.subset(qids) if hasattr(ds.queries, "subset") else ds.queries
    runs = []
    for name, params in SYSTEMS.items():
        r = create("bm25s", params, name=name)
        r.index(ds.corpus)
        runs.append(r.search(queries, K))
    pairs = pool_pairs(runs, K, qids)
    pool = ps.pool_arrays(pairs, list(SYSTEMS), "ndcg", K)
    true = np.array([min(1, qrels.get(p["qid"], {}).get(p["doc_id"], 0)) for p in pairs], dtype=np.int64)
    from retbench.data.qrels import Qrels

    full = {}
    for r in runs:
        ev = evaluate(Qrels({q: qrels[q] for q in pool.qids}), r, [METRIC], no_relevant="zero")
        by_q = dict(zip(ev.query_ids, ev.column(METRIC), strict=True))
        full[r.name] = np.array([by_q.get(q, 0.0) for q in pool.qids])
    pooled_true = ps.scores(pool, pool.gather(true.astype(float)))
    return {"pool": pool, "true": true, "full": full, "pooled": pooled_true, "n_pairs": len(pairs)}


def one_judge(s: dict, conf: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Judge grades drawn by the confusion matrix, and the calibrated posterior per pair."""
    true = s["true"]
    cdf = np.cumsum(conf[true], axis=1)
    g = np.minimum((rng.uniform(size=(true.size, 1)) > cdf).sum(axis=1), 1)
    prior = np.bincount(true, minlength=2) / true.size
    post = prior[:, None] * conf  # P(true = h, judge = g')
    post = (post / post.sum(axis=0, keepdims=True)).T  # row g': P(true = h | judge = g')
    return g, post[g]


def simulate(s: dict, reps: int, fractions: list[float], draws: int) -> list[dict]:
    pool, systems = s["pool"], list(SYSTEMS)
    decision = {"a": "A", "b": "B"}
    cost = pool.mask.sum(axis=1)
    truth_full = s["full"]["B"] - s["full"]["A"]
    truth_pool = s["pooled"][1] - s["pooled"][0]
    rows = []
    for judge, conf in JUDGES.items():
        for rep in range(reps):
            rng = np.random.default_rng([rep, len(judge)])
            g, post = one_judge(s, conf, rng)
            probs = np.where(pool.mask[..., None], post[np.maximum(pool.pair_ids, 0)], 0.0)
            probs[~pool.mask, 0] = 1.0
            predicted = pool.gather(g.astype(float))
            f_hat_all = ps.scores(pool, predicted)
            f_hat = f_hat_all[1] - f_hat_all[0]
            u = ps.uncertainty(pool, predicted, probs, np.array([0, 1]), systems, decision, draws=draws, seed=rep)
            for sampler in ("active", "uniform"):
                w = sampling_weights(u, cost=cost, mix=MIX) if sampler == "active" else np.ones(len(cost))
                keys = queue_keys(w, seed=10_000 + rep)
                for frac in fractions:
                    t = queue_threshold(keys, cost, frac * s["n_pairs"])
                    xi, pi = keys < t, inclusion(w, t)
                    est = active_mean(f_hat, truth_pool, xi, pi, lam=None)
                    lo, hi = est.interval(0.05, "logged")
                    plo, phi = est.interval(0.05, "population")
                    means = []
                    for i in range(len(systems)):
                        e = active_mean(f_hat_all[i], s["pooled"][i], xi, pi, lam=None)
                        mlo, mhi = e.interval(0.05, "logged")
                        means.append(bool(mlo <= s["pooled"][i].mean() <= mhi))
                    rows.append(
                        {
                            "judge": judge,
                            "sampler": sampler,
                            "fraction": frac,
                            "rep": rep,
                            "human_pairs": int(cost[xi].sum()),
                            "half_width": (hi - lo) / 2,
                            "half_width_population": (phi - plo) / 2,
                            "cover_full": bool(lo <= truth_full.mean() <= hi),
                            "cover_pool": bool(lo <= truth_pool.mean() <= hi),
                            "cover_population_full": bool(plo <= truth_full.mean() <= phi),
                            "cover_a_full": means[0],
                            "cover_b_full": means[1],
                            "lam": est.lam,
                        }
                    )
    return rows


def summarise(rows: list[dict]) -> list[dict]:
    out = []
    keys = sorted(
        {(r["judge"], r["sampler"], r["fraction"]) for r in rows}, key=lambda k: (list(JUDGES).index(k[0]), k[1], k[2])
    )
    for judge, sampler, frac in keys:
        sel = [r for r in rows if (r["judge"], r["sampler"], r["fraction"]) == (judge, sampler, frac)]
        out.append(
            {
                "judge": judge,
                "sampler": sampler,
                "fraction": frac,
                "reps": len(sel),
                "human_pairs": float(np.mean([r["human_pairs"] for r in sel])),
                "half_width": float(np.mean([r["half_width"] for r in sel])),
                "half_width_population": float(np.mean([r["half_width_population"] for r in sel])),
                "coverage_full": float(np.mean([r["cover_full"] for r in sel])),
                "coverage_pool": float(np.mean([r["cover_pool"] for r in sel])),
                "coverage_population": float(np.mean([r["cover_population_full"] for r in sel])),
                "coverage_a": float(np.mean([r["cover_a_full"] for r in sel])),
                "coverage_b": float(np.mean([r["cover_b_full"] for r in sel])),
                "lam": float(np.mean([r["lam"] for r in sel])),
            }
        )
    return out


def labels_for(summary: list[dict], judge: str, sampler: str, width: float) -> float | None:
    """Human pairs needed for a mean half-width (linear interpolation between budgets), None if out of range."""
    pts = sorted(
        (r["half_width"], r["human_pairs"]) for r in summary if r["judge"] == judge and r["sampler"] == sampler
    )
    hw, n = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    if width < hw.min() or width > hw.max():
        return None
    return float(np.interp(width, hw, n))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--tiny", action="store_true", help="100 queries, 10 repetitions: a smoke test")
    ap.add_argument("--draws", type=int, default=100, help="Monte Carlo draws for each query's uncertainty")
    ap.add_argument("--output", type=Path, default=Path("/tmp/label_simulation.json"))
    args = ap.parse_args()
    reps = 10 if args.tiny else args.reps
    fractions = [0.05, 0.2, 0.5] if args.tiny else [0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5]
    t0 = time.time()
    s = setup(100 if args.tiny else None)
    truth = s["full"]["B"] - s["full"]["A"]
    print(
        f"{len(s['pool'].qids)} queries, {s['n_pairs']} pooled pairs; full-qrels nDCG@10 A {s['full']['A'].mean():.4f} "
        f"B {s['full']['B'].mean():.4f} B-A {truth.mean():.4f} (pooled-labels B-A {(s['pooled'][1] - s['pooled'][0]).mean():.4f})"
    )
    rows = simulate(s, reps, fractions, args.draws)
    summary = summarise(rows)
    print(
        "| judge | sampler | human share | human pairs | half-width | half-width (population) | coverage (full) | coverage (pooled) | coverage (population interval) | A mean covered (pooled truth) | B mean covered (pooled truth) | mean λ |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in summary:
        print(
            f"| {r['judge']} | {r['sampler']} | {r['fraction']:.0%} | {r['human_pairs']:.0f} | {r['half_width']:.4f} | {r['half_width_population']:.4f} | "
            f"{r['coverage_full']:.3f} | {r['coverage_pool']:.3f} | {r['coverage_population']:.3f} | {r['coverage_a']:.3f} | {r['coverage_b']:.3f} | {r['lam']:.2f} |"
        )
    print(
        f"\nmin coverage of B-A (full truth, logged interval): {min(r['coverage_full'] for r in summary):.3f}; "
        f"mean {np.mean([r['coverage_full'] for r in summary]):.3f}; of each mean: "
        f"{min(min(r['coverage_a'], r['coverage_b']) for r in summary):.3f}; population interval: "
        f"{min(r['coverage_population'] for r in summary):.3f}"
    )
    good20 = [r for r in summary if r["judge"] == "good" and r["sampler"] == "active" and r["fraction"] <= 0.2]
    print(
        "good judge, active, half-width at <= 20% labelled: "
        + ", ".join(f"{r['fraction']:.0%}: {r['half_width']:.4f}" for r in good20)
    )
    for judge in JUDGES:
        for width in (0.03, 0.02, 0.015):
            a, u = labels_for(summary, judge, "active", width), labels_for(summary, judge, "uniform", width)
            if a is not None and u is not None:
                print(
                    f"{judge}: half-width {width}: active {a:.0f} human pairs, uniform {u:.0f} ({1 - a / u:+.0%} fewer)"
                )
    args.output.write_text(json.dumps({"summary": summary, "seconds": time.time() - t0, "reps": reps}, indent=1))
    print(f"{time.time() - t0:.0f} s; summary -> {args.output}")


if __name__ == "__main__":
    main()
