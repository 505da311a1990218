"""Does the label study's active PPI interval hold, and does choosing the pairs save labels? A simulation.

Two settings with full human judgements play the study (`label_simulation_data`): SciFact (test + train
queries, qrels as the people, units (query, abstract)) and the shipped chunking set (375 questions, gold
excerpts, units (question, chunk) of an 800-character recursive chunking). In each, A and B are two BM25
variants pooled at depth 10 exactly as `retbench label init` pools, and the full-qrels nDCG@10 (B − A, and
each system's mean, over the setting's queries) is the truth. A simulated LLM judge grades every pooled pair:
by default a calibrated judge whose grade probabilities vary pair by pair (drawn from a Dirichlet whose mean is
its confusion row; `--judge-model confusion`: the earlier fixed confusion matrix). Each repetition draws new
judge grades and a new queue, then labels the queue up to each budget (a share of the pooled pairs) with the
study's own code (`active.sampling_weights`, `queue_keys`, `queue_threshold`, `active_mean` with cross-fitted
λ, `pool_scores.uncertainty` for u_q), once with the active weights and once with uniform weights.

    flock /tmp/retbench-heavy.lock .venv/bin/python benchmarks/label_simulation.py            # 200 repetitions
    .venv/bin/python benchmarks/label_simulation.py --tiny                                     # a smoke test

Printed per setting, judge, sampler and budget: coverage of the full-qrels truth by the 95% `logged` interval
(Student's t, and the earlier normal one) and the `population` interval, mean half-widths, mean human-labelled
pairs; then the goals' verdicts. The JSON summary goes to --output.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from label_simulation_data import CONFUSION, SETTINGS, SYSTEMS, implied_confusion, judge_draw
from retbench.active import active_mean, inclusion, queue_keys, queue_threshold, sampling_weights, z_quantile
from retbench.studies.labels import pool_scores as ps
from retbench.studies.labels.answer import MIX

JUDGES = list(CONFUSION)
WIDTHS = (0.03, 0.02, 0.015)  # half-widths at which the labels needed by each sampler are compared
Z = z_quantile(0.975)


def _covers(lo: float, hi: float, value: float) -> bool:
    return bool(lo <= value <= hi)


def one_rep(s: dict, model: str, judge: str, rep: int, fractions: list[float], draws: int) -> list[dict]:
    """One judge draw and one queue per sampler, labelled up to each budget."""
    pool, systems = s["pool"], list(SYSTEMS)
    cost = pool.mask.sum(axis=1)
    truth = s["full"]["B"] - s["full"]["A"]
    pooled_diff = s["pooled"][1] - s["pooled"][0]
    rng = np.random.default_rng([rep, JUDGES.index(judge), len(s["name"])])
    g, p = judge_draw(model, judge, s, rng)
    probs = np.where(pool.mask[..., None], p[np.maximum(pool.pair_ids, 0)], 0.0)
    probs[~pool.mask, 0] = 1.0
    predicted = pool.gather(g.astype(float))
    f_hat_all = ps.scores(pool, predicted)
    f_hat = f_hat_all[1] - f_hat_all[0]
    u = ps.uncertainty(pool, predicted, probs, np.array([0, 1]), systems, {"a": "A", "b": "B"}, draws=draws, seed=rep)
    rows = []
    for sampler in ("active", "uniform"):
        w = sampling_weights(u, cost=cost, mix=MIX) if sampler == "active" else np.ones(len(cost))
        keys = queue_keys(w, seed=10_000 + rep)
        for frac in fractions:
            t = queue_threshold(keys, cost, frac * s["n_pairs"])
            xi, pi = keys < t, inclusion(w, t)
            est = active_mean(f_hat, pooled_diff, xi, pi, lam=None)
            lo, hi = est.interval(0.05, "logged")
            plo, phi = est.interval(0.05, "population")
            means = {}
            for i, name in enumerate(systems):
                e = active_mean(f_hat_all[i], s["pooled"][i], xi, pi, lam=None)
                # each mean against its pooled-labels value (nDCG's ideal ranking is made of the pooled pairs)
                means[f"cover_{name}_logged"] = _covers(*e.interval(0.05, "logged"), s["pooled"][i].mean())
                means[f"cover_{name}_population"] = _covers(*e.interval(0.05, "population"), s["pooled"][i].mean())
            rows.append(
                {
                    "setting": s["name"],
                    "judge": judge,
                    "sampler": sampler,
                    "fraction": frac,
                    "rep": rep,
                    "human_pairs": int(cost[xi].sum()),
                    "half_width": (hi - lo) / 2,
                    "half_width_normal": Z * est.se_logged,
                    "half_width_population": (phi - plo) / 2,
                    "cover_logged": _covers(lo, hi, truth.mean()),
                    "cover_logged_pool": _covers(lo, hi, pooled_diff.mean()),
                    "cover_normal": bool(abs(est.estimate - truth.mean()) <= Z * est.se_logged),
                    "cover_population": _covers(plo, phi, truth.mean()),
                    "df": min(est.df_logged, 1e6),
                    "lam": est.lam,
                    **means,
                }
            )
    return rows


CELL = ("setting", "judge", "sampler", "fraction")
AVERAGED = ("human_pairs", "half_width", "half_width_normal", "half_width_population", "lam")
RATES = ("cover_logged", "cover_logged_pool", "cover_normal", "cover_population", "cover_A_logged", "cover_B_logged",
         "cover_A_population", "cover_B_population")  # fmt: skip


def summarise(rows: list[dict]) -> list[dict]:
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault(tuple(r[k] for k in CELL), []).append(r)
    out = []
    for key, sel in cells.items():
        cell = dict(zip(CELL, key, strict=True))
        cell["reps"] = len(sel)
        cell.update({k: float(np.mean([r[k] for r in sel])) for k in AVERAGED + RATES})
        cell["df_median"] = float(np.median([r["df"] for r in sel]))
        out.append(cell)
    return out


def labels_for(summary: list[dict], setting: str, judge: str, sampler: str, width: float, column: str) -> float | None:
    """Human pairs needed for a mean half-width (linear interpolation between budgets), None if out of range."""
    pts = sorted(
        (r[column], r["human_pairs"])
        for r in summary
        if (r["setting"], r["judge"], r["sampler"]) == (setting, judge, sampler)
    )
    hw, n = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    if width < hw.min() or width > hw.max():
        return None
    return float(np.interp(width, hw, n))


def savings(summary: list[dict], setting: str, judge: str) -> list[dict]:
    """Share of human pairs active sampling saves against uniform at each half-width both reach."""
    out = []
    for column in ("half_width_population", "half_width"):
        for width in WIDTHS:
            a = labels_for(summary, setting, judge, "active", width, column)
            u = labels_for(summary, setting, judge, "uniform", width, column)
            if a is not None and u is not None:
                out.append({"interval": column, "width": width, "active": a, "uniform": u, "saved": 1 - a / u})
    return out


def report(settings: list[dict], summary: list[dict], model: str) -> None:
    for s in settings:
        truth = s["full"]["B"] - s["full"]["A"]
        conf = {j: np.round(implied_confusion(model, j, s["base_rate"]), 3).tolist() for j in JUDGES}
        print(
            f"\n## {s['name']}: {len(s['pool'].qids)} queries, {s['n_pairs']} pooled {s['units']}, "
            f"{s['base_rate'][1]:.3f} relevant; full-qrels nDCG@10 A {s['full']['A'].mean():.4f} "
            f"B {s['full']['B'].mean():.4f} B-A {truth.mean():.4f} (pooled-labels B-A "
            f"{(s['pooled'][1] - s['pooled'][0]).mean():.4f}); judges P(judge grade | true grade): {conf}"
        )
    print(
        "\n| setting | judge | sampler | human share | human pairs | half-width logged (t) | logged (normal) | "
        "population | coverage logged (t) | logged (normal) | population | A, B covered (logged t) | "
        "A, B covered (population) | B-A covered, pooled truth (logged t) | median df | mean λ |"
    )
    print("|---" * 16 + "|")
    for r in summary:
        print(
            f"| {r['setting']} | {r['judge']} | {r['sampler']} | {r['fraction']:.0%} | {r['human_pairs']:.0f} | "
            f"{r['half_width']:.4f} | {r['half_width_normal']:.4f} | {r['half_width_population']:.4f} | "
            f"{r['cover_logged']:.3f} | {r['cover_normal']:.3f} | {r['cover_population']:.3f} | "
            f"{r['cover_A_logged']:.3f}, {r['cover_B_logged']:.3f} | "
            f"{r['cover_A_population']:.3f}, {r['cover_B_population']:.3f} | {r['cover_logged_pool']:.3f} | "
            f"{r['df_median']:.0f} | {r['lam']:.2f} |"
        )
    print()
    for s in settings:
        for judge in JUDGES:
            sel = [r for r in summary if (r["setting"], r["judge"]) == (s["name"], judge)]
            print(
                f"{s['name']} {judge}: lowest coverage of B-A, logged t {min(r['cover_logged'] for r in sel):.3f} "
                f"(normal {min(r['cover_normal'] for r in sel):.3f}; of the pooled truth "
                f"{min(r['cover_logged_pool'] for r in sel):.3f}), population "
                f"{min(r['cover_population'] for r in sel):.3f}; of each mean (pooled truth), logged t "
                f"{min(min(r['cover_A_logged'], r['cover_B_logged']) for r in sel):.3f}, population "
                f"{min(min(r['cover_A_population'], r['cover_B_population']) for r in sel):.3f}"
            )
            for v in savings(summary, s["name"], judge):
                print(
                    f"    {v['interval']} {v['width']}: active {v['active']:.0f} human pairs, uniform "
                    f"{v['uniform']:.0f} ({v['saved']:+.0%} fewer)"
                )
            at20 = [r for r in sel if r["sampler"] == "active" and r["fraction"] <= 0.2]
            print(
                "    active, half-width logged t / population at <= 20%: "
                + ", ".join(
                    f"{r['fraction']:.0%}: {r['half_width']:.4f} / {r['half_width_population']:.4f}" for r in at20
                )
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--tiny", action="store_true", help="100 queries per setting, 10 repetitions: a smoke test")
    ap.add_argument("--draws", type=int, default=100, help="Monte Carlo draws for each query's uncertainty")
    ap.add_argument("--judge-model", choices=("dirichlet", "confusion"), default="dirichlet")
    ap.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated: " + ", ".join(SETTINGS))
    ap.add_argument("--output", type=Path, default=Path("/tmp/label_simulation.json"))
    args = ap.parse_args()
    reps = 10 if args.tiny else args.reps
    fractions = [0.05, 0.2, 0.5] if args.tiny else [0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5]
    t0 = time.time()
    settings = [SETTINGS[name](100 if args.tiny else None) for name in args.settings.split(",")]
    rows = [
        row
        for s in settings
        for judge in JUDGES
        for rep in range(reps)
        for row in one_rep(s, args.judge_model, judge, rep, fractions, args.draws)
    ]
    summary = summarise(rows)
    report(settings, summary, args.judge_model)
    verdicts = {f"{s['name']}/{j}": savings(summary, s["name"], j) for s in settings for j in JUDGES}
    args.output.write_text(
        json.dumps(
            {
                "summary": summary,
                "savings": verdicts,
                "seconds": time.time() - t0,
                "reps": reps,
                "judge_model": args.judge_model,
            },
            indent=1,
        )
    )
    print(f"{time.time() - t0:.0f} s; summary -> {args.output}")


if __name__ == "__main__":
    main()
