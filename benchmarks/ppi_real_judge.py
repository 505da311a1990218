"""What prediction-powered inference gives with a real local LLM judge on SciFact.

    .venv/bin/python benchmarks/ppi_real_judge.py --judge configs/judge-calibration-llamacpp.yaml \
        --queries 50 --k 5 --human 20 --splits 2000

BM25 (bm25s, Lucene, stopwords, stemmer) retrieves the top `k` for `queries` seeded SciFact test queries and
the calibration config's judge grades every one of those pairs (cached, logged). SciFact's human qrels
label every query, so the all-human mean of P@k over these queries is known, and each seeded split can
pretend only `human` of them carry human labels:

- human only: the classical (CLT) interval from the `human` labelled queries;
- LLM only: the mean of the LLM labels over all queries with its classical interval (judge bias uncorrected);
- PPI: `retbench.stats.ppi_mean` (LLM labels on all queries, corrected by the human-minus-LLM difference
  on the `human` labelled ones), with the binary LLM P@k (grade >= relevant_from) and, when the server
  returned grade probabilities, with the continuous one (mean over the top k of P(grade >= relevant_from));
  PPI++ (power-tuned lambda) beside each.

Printed per estimator: how often its interval covers the all-human mean over the splits, its mean width,
and its mean estimate. Coverage is of the mean over these queries (the splits resample which of them are
labelled), so a valid interval covers it at least as often as the nominal 95%. A query with a failed
verdict is left out and counted. Writes the per-query values and the summary to `--output`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from retbench.io.datasets import load_dataset
from retbench.io.files import write_json
from retbench.llm.judge import Judge, open_base_url
from retbench.retrievers.base import create
from retbench.stats.ppi import classical_mean_ci, ppi_mean
from retbench.studies.labels.calibrate import load_calibration
from retbench.studies.labels.relevance import judge_items

BM25 = {"k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en", "stemmer": "english"}


def per_query(args: argparse.Namespace) -> tuple[dict[str, dict[str, float]], dict[str, object]]:
    """Each query's P@k under human labels and under the judge's (binary and, when given, continuous)."""
    cfg = load_calibration(args.judge)
    ds = load_dataset("scifact", ["test"])
    human = ds.split("test")
    qids = sorted(q for q in human if q in ds.queries)
    qids = random.Random(args.seed).sample(qids, min(args.queries, len(qids)))
    bm25 = create("bm25s", BM25, name="bm25")
    bm25.index(ds.corpus)
    run = bm25.search(ds.queries.subset(qids), args.k)
    pairs = [(q, d) for q in qids for d in run.docs(q)[: args.k]]
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open_base_url(cfg.judge) as url:
        judge = Judge(cfg.judge, base_url=url, log_path=out / "judge_calls.jsonl")
        verdicts = judge.judge(judge_items(pairs, ds.queries, ds.corpus, cfg.max_chars))
        identity = judge.identity.to_dict()
    seconds = time.perf_counter() - t0
    by_query: dict[str, list] = {}
    for (q, d), v in zip(pairs, verdicts, strict=True):
        by_query.setdefault(q, []).append((d, v))
    values: dict[str, dict[str, float]] = {}
    failed = 0
    for q, hits in by_query.items():
        if not all(v.ok for _, v in hits):
            failed += 1
            continue
        row = {
            "human": sum(human[q].get(d, 0) >= 1 for d, _ in hits) / args.k,
            "llm": sum(v.value >= cfg.relevant_from for _, v in hits) / args.k,
        }
        if all(v.probabilities for _, v in hits):
            row["llm_prob"] = (
                sum(sum(p for g, p in v.probabilities.items() if int(g) >= cfg.relevant_from) for _, v in hits) / args.k
            )
        values[q] = row
    facts = {
        "judge": identity,
        "pairs": len(pairs),
        **judge.stats.to_dict(cfg.judge),
        "seconds": round(seconds, 1),
        "queries_left_out_for_a_failed_verdict": failed,
    }
    return values, facts


def summarize(values: dict[str, dict[str, float]], n_human: int, splits: int, seed: int) -> dict[str, dict]:
    """Coverage of the all-human mean, mean width and mean estimate of each estimator over seeded splits."""
    qids = sorted(values)
    y_all = np.array([values[q]["human"] for q in qids])
    truth = float(y_all.mean())
    preds = [p for p in ("llm", "llm_prob") if all(p in values[q] for q in qids)]
    rng = np.random.default_rng(seed)
    rows: dict[str, list[tuple[float, float, float]]] = {"human only": []}
    for p in preds:
        rows[f"LLM only ({p})"] = [classical_mean_ci([values[q][p] for q in qids])] * splits
    for _ in range(splits):
        lab = rng.permutation(len(qids))[:n_human]
        unl = np.setdiff1d(np.arange(len(qids)), lab)
        rows["human only"].append(classical_mean_ci(y_all[lab]))
        for p in preds:
            f = np.array([values[q][p] for q in qids])
            rows.setdefault(f"PPI ({p})", []).append(ppi_mean(y_all[lab], f[lab], f[unl]))
            rows.setdefault(f"PPI++ ({p})", []).append(ppi_mean(y_all[lab], f[lab], f[unl], lam=None))
    summary = {
        name: {
            "coverage": float(np.mean([lo <= truth <= hi for _, lo, hi in ivs])),
            "mean_width": float(np.mean([hi - lo for _, lo, hi in ivs])),
            "mean_estimate": float(np.mean([e for e, _, _ in ivs])),
        }
        for name, ivs in rows.items()
    }
    return {"all_human_mean": truth, "queries": len(qids), "human_labelled": n_human, "estimators": summary}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge", required=True, help="a calibration config whose judge block is used")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--human", type=int, default=20, help="queries treated as human-labelled in each split")
    ap.add_argument("--splits", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output", default="results/ppi-real-judge")
    args = ap.parse_args(argv)
    values, facts = per_query(args)
    if len(values) <= args.human:
        print(f"only {len(values)} queries have every verdict; need more than --human {args.human}", file=sys.stderr)
        return 1
    result = {**facts, **summarize(values, args.human, args.splits, args.seed)}
    print(json.dumps(facts, indent=1))
    print(
        f"P@{args.k} of BM25 over {result['queries']} SciFact test queries; all-human mean {result['all_human_mean']:.4f}"
    )
    print(f"{args.human} queries human-labelled per split, {args.splits} seeded splits")
    print(f"{'estimator':<24} {'coverage':>9} {'mean width':>11} {'mean estimate':>14}")
    for name, s in result["estimators"].items():
        print(f"{name:<24} {s['coverage']:>9.3f} {s['mean_width']:>11.4f} {s['mean_estimate']:>14.4f}")
    write_json(Path(args.output) / "summary.json", {**result, "per_query": values})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
