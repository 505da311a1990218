"""The study's answer: each system's mean and the decision's difference from LLM and people's labels, and
which pairs people should grade next so the interval of that answer narrows fastest.

The estimator and the sampling design are `retbench.active` (active statistical inference, Zrnic and Candès,
ICML 2024): the unit is the query; f̂_q is the metric from the judge's grades, f_q from people's grades of
every pooled pair of q; u_q, the expected squared error of f̂_q, comes from the judge's grade probabilities
(`pool_scores.uncertainty`). The queue is fixed the first time it is asked for (`order`, `unit_w`, `unit_key`
on each pair) so later verdicts cannot reshuffle a sample people are already labelling. A query counts as
labelled when every pooled pair of it has a human grade and every query before it in the queue has too
(the estimate stops at the first query not yet complete: later ones wait, they are not dropped silently).
Without grade probabilities the judge's errors are read from the pairs people and the judge both graded
(P(human grade | judge grade), add-one smoothed) once there are enough, else the design is uniform.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from retbench.active import (
    active_mean,
    expected_half_width,
    inclusion,
    queue_keys,
    queue_threshold,
    sampling_weights,
)
from retbench.errors import InputError
from retbench.io.files import json_safe
from retbench.stats.ppi import classical_mean_ci
from retbench.studies.labels import pool_scores as ps
from retbench.studies.labels.log import read_labels
from retbench.studies.labels.study import Study, metric_parts, read_study

#: pairs graded by both before their confusion stands in for missing grade probabilities
MIN_CONFUSION_PAIRS = 30
MIX = 0.2  # share of the uniform design in each query's sampling weight (keeps every π away from 0)


def _arrays(study: Study, human: dict[int, int]) -> dict[str, Any]:
    """The pool, the judge's grades and probabilities, and people's grades as arrays."""
    family, cut = metric_parts(study.meta["metric"], int(study.meta["k"]))
    pool = ps.pool_arrays(study.pairs, study.systems, family, cut)
    scale = np.asarray(study.meta.get("scale") or [0, 1, 2, 3], dtype=np.int64)
    n = len(study.pairs)
    llm = np.zeros(n)
    probs = np.full((n, scale.size), 1.0 / scale.size)  # a failed verdict: any grade
    has_probs = np.zeros(n, dtype=bool)
    ok = np.zeros(n, dtype=bool)
    for p in study.pairs:
        v = p.get("llm") or {}
        if v.get("status") == "ok" and v.get("grade") is not None:
            i = p["pair_id"]
            ok[i], llm[i] = True, int(v["grade"])
            probs[i] = scale == int(v["grade"])
            if v.get("probs"):
                row = np.array([float(v["probs"].get(str(g), 0.0)) for g in scale])
                if row.sum() > 0:
                    probs[i], has_probs[i] = row / row.sum(), True
    both = [i for i in human if ok[i]]
    if len(both) >= MIN_CONFUSION_PAIRS:
        conf = np.ones((scale.size, scale.size))
        for i in both:
            conf[np.searchsorted(scale, llm[i]), np.searchsorted(scale, human[i])] += 1
        conf /= conf.sum(axis=1, keepdims=True)
        use = ok & ~has_probs
        probs[use] = conf[np.searchsorted(scale, llm[use].astype(np.int64))]
    hum = np.full(n, np.nan)
    for i, g in human.items():
        if 0 <= i < n:
            hum[i] = g
    return {"pool": pool, "scale": scale, "llm": llm, "ok": ok, "probs": probs, "human": hum}


def _uncertainty(study: Study, a: dict[str, Any]) -> np.ndarray:
    pool = a["pool"]
    probs = np.where(pool.mask[..., None], a["probs"][np.maximum(pool.pair_ids, 0)], 0.0)
    probs[~pool.mask, 0] = 1.0
    return ps.uncertainty(
        pool,
        pool.gather(a["llm"]),
        probs,
        a["scale"],
        study.systems,
        study.meta.get("decision"),
        seed=study.meta["seed"],
    )


def _queue(study: Study, a: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(w_q, key_q) per query, made and stored on the pairs the first time (then read back unchanged)."""
    pool = a["pool"]
    first = {int(pid): q for q, row in enumerate(pool.pair_ids) for pid in row[row >= 0]}
    if all(p.get("unit_key") is not None for p in study.pairs):
        w, keys = np.zeros(len(pool.qids)), np.zeros(len(pool.qids))
        for p in study.pairs:
            w[first[p["pair_id"]]], keys[first[p["pair_id"]]] = p["unit_w"], p["unit_key"]
        return w, keys
    if not any(p.get("llm") for p in study.pairs):
        raise InputError(
            "no pair has a judge verdict yet: run `retbench label prelabel` first (the queue is chosen from the "
            "judge's grades and fixed once made)",
            path=study.path / "pairs.jsonl",
        )
    u = _uncertainty(study, a)
    u_unit = u if u.ndim == 1 else u.sum(axis=0)
    w = sampling_weights(u_unit, cost=pool.mask.sum(axis=1), mix=MIX)
    keys = queue_keys(w, int(study.meta["seed"]))
    position = 0
    for q in np.argsort(keys, kind="stable"):
        for pid in pool.pair_ids[q][pool.pair_ids[q] >= 0]:
            p = study.pairs[int(pid)]
            p.update(order=position, unit_w=float(w[q]), unit_key=float(keys[q]))
            position += 1
    study.save_pairs()
    return w, keys


def _complete(a: dict[str, Any]) -> np.ndarray:
    pool = a["pool"]
    return np.all(~pool.mask | ~np.isnan(pool.gather(a["human"], fill=0.0)), axis=1)


def _threshold(keys: np.ndarray, complete: np.ndarray) -> float:
    """The key of the first query in the queue that people have not finished (inf when all are done)."""
    waiting = keys[~complete]
    return float(waiting.min()) if waiting.size else math.inf


def _one(f_hat: np.ndarray, f: np.ndarray, xi: np.ndarray, pi: np.ndarray, alpha: float, estimand: str) -> dict:
    """One estimate block: PPI (active), human (everything labelled), or LLM (no labels yet, bias uncorrected)."""
    if xi.all() and np.all(pi >= 1.0):
        mean, low, high = classical_mean_ci(f, alpha) if f.size >= 2 else (float(f.mean()), math.nan, math.nan)
        return {"mean": mean, "low": low, "high": high, "estimate": "human", "lam": 0.0}
    if not xi.any():
        mean, low, high = (
            classical_mean_ci(f_hat, alpha) if f_hat.size >= 2 else (float(f_hat.mean()), math.nan, math.nan)
        )
        return {"mean": mean, "low": low, "high": high, "estimate": "LLM", "lam": 1.0}
    est = active_mean(f_hat, f, xi, pi, lam=None)
    low, high = est.interval(alpha, estimand)
    logged, population = est.interval(alpha, "logged"), est.interval(alpha, "population")
    return {
        "mean": est.estimate,
        "low": low,
        "high": high,
        "estimate": "PPI",
        "lam": est.lam,
        "logged": {"low": logged[0], "high": logged[1]},
        "population": {"low": population[0], "high": population[1]},
    }


#: the range of every metric a label study scores (nDCG@k and P@k); a difference of two lies in [-1, 1]
METRIC_RANGE = (0.0, 1.0)


def _clipped(block: dict[str, Any], lo: float, hi: float) -> dict[str, Any]:
    """`block` with its mean and interval ends (also those under "logged" and "population") held inside
    [lo, hi], and `clipped` ("[0, 1]") saying so when any moved.

    A PPI estimate adds the labelled queries' correction to the LLM mean, and its interval rests on few
    labelled queries, so either can leave the range no value of the metric can take (nDCG@2 1.24 [-1.19, 3.66]
    on 3 queries); the clipped interval holds the truth whenever the unclipped one does."""
    moved = False

    def inside(part: dict[str, Any]) -> dict[str, Any]:
        nonlocal moved
        out = dict(part)
        for key in ("mean", "low", "high"):
            v = out.get(key)
            if isinstance(v, float) and v == v and not lo <= v <= hi:
                out[key], moved = min(max(v, lo), hi), True
        return out

    out = inside(block)
    for key in ("logged", "population"):
        if isinstance(out.get(key), dict):
            out[key] = inside(out[key])
    if moved:
        out["clipped"] = f"[{lo:g}, {hi:g}]"
    return out


def estimate_study(study_dir: str | Path, alpha: float = 0.05, pair: tuple[str, str] | None = None) -> dict[str, Any]:
    """Per system {"mean", "low", "high", "n_human", "n_llm", "estimate"} and, with a decision, "difference"
    (B − A). The interval is for study.json's `estimand`: `population` (the queries the logged ones were drawn
    from) or `logged` (these queries); both are given under each block's "logged" / "population".

    `pair` (A, B) estimates that difference instead of the study's decision (the gate's baseline and
    candidate); the estimator stays unbiased whatever the queue was chosen for, only its width may differ."""
    study = read_study(study_dir)
    if pair is not None:
        unknown = [s for s in pair if s not in study.systems]
        if unknown:
            raise InputError(
                f"no system {unknown[0]!r} in this study (systems: {', '.join(study.systems)})",
                path=study.path / "study.json",
                field="systems",
            )
        study.meta["decision"] = {"a": pair[0], "b": pair[1]}
    labels = read_labels(study.path)
    human = labels.human_grades()
    a = _arrays(study, human)
    pool = a["pool"]
    complete = _complete(a)
    queued = all(p.get("unit_key") is not None for p in study.pairs)
    if queued:
        w, keys = _queue(study, a)
        t = _threshold(keys, complete)
        xi, pi = keys < t, inclusion(w, t)
    else:  # people graded without a queue: only a fully labelled pool is usable
        xi = np.full(len(pool.qids), bool(complete.all()))
        pi = np.ones(len(pool.qids))
    llm_vals = ps.scores(pool, pool.gather(a["llm"]))
    hum_vals = ps.scores(pool, np.nan_to_num(pool.gather(a["human"], fill=0.0)))
    estimand = study.meta.get("estimand", "population")
    labelled_pairs = int(pool.mask[xi].sum())
    counts = {
        "n_human": labelled_pairs,
        "n_llm": int(a["ok"].sum()),
        "n_queries": len(pool.qids),
        "n_queries_human": int(xi.sum()),
    }
    out: dict[str, Any] = {"metric": study.meta["metric"], "estimand": estimand, "alpha": alpha, "systems": {}}
    for s, name in enumerate(study.systems):
        block = _clipped(_one(llm_vals[s], hum_vals[s], xi, pi, alpha, estimand), *METRIC_RANGE)
        out["systems"][name] = {**block, **counts, "judged": _judged_share(a, pool, s)}
    decision = study.meta.get("decision")
    if decision:
        d_llm = ps.target(llm_vals, study.systems, decision)
        d_hum = ps.target(hum_vals, study.systems, decision)
        out["difference"] = {
            "a": decision["a"],
            "b": decision["b"],
            **_clipped(_one(d_llm, d_hum, xi, pi, alpha, estimand), -METRIC_RANGE[1], METRIC_RANGE[1]),
            **counts,
        }
    if len(study.systems) > 2:
        out["ranks"] = _rank_intervals(study.systems, llm_vals, hum_vals, xi, pi, alpha, estimand)
    out["labels"] = {
        "pairs_graded": len(human),
        "labellers": sorted(labels.by_labeller()),
        "waiting": int((complete & ~xi).sum()),
        "notes": [labels.note] if labels.note else [],
    }
    return json_safe(out)


def _judged_share(a: dict[str, Any], pool: ps.PoolArrays, s: int) -> float:
    """Share of system s's top-k pairs that carry a label (an ok verdict or a person's grade)."""
    top = pool.ranks[s] > 0
    labelled = pool.gather(a["ok"].astype(np.float64)) + ~np.isnan(pool.gather(a["human"], fill=np.nan))
    return float((labelled[top] > 0).mean()) if top.any() else 0.0


def _rank_intervals(systems, llm_vals, hum_vals, xi, pi, alpha, estimand) -> dict[str, list[int]]:
    """Each system's rank interval: [1 + systems surely better, S − systems surely worse], from pairwise
    difference intervals at alpha / (S − 1) (Bonferroni over the S − 1 comparisons each system is in)."""
    n = len(systems)
    better = np.zeros((n, n), dtype=bool)  # better[i, j]: j surely beats i
    for i in range(n):
        for j in range(n):
            if i != j:
                d = _one(llm_vals[j] - llm_vals[i], hum_vals[j] - hum_vals[i], xi, pi, alpha / (n - 1), estimand)
                better[i, j] = bool(d["low"] > 0)
    return {name: [1 + int(better[i].sum()), n - int(better[:, i].sum())] for i, name in enumerate(systems)}


def next_pairs(study_dir: str | Path, labeller: str, n: int) -> list[int]:
    """The pair ids `labeller` should grade next: queue order, skipping pairs they graded or skipped and pairs
    someone else already graded (a second opinion is asked for only by the page's agreement mode)."""
    study = read_study(study_dir)
    labels = read_labels(study.path)
    human = labels.human_grades()
    _queue(study, _arrays(study, human))
    seen = labels.done(labeller) | set(human)
    ordered = sorted((p for p in study.pairs if p.get("order") is not None), key=lambda p: p["order"])
    return [p["pair_id"] for p in ordered if p["pair_id"] not in seen][: max(n, 0)]


def plan_next(study_dir: str | Path, budget: int, alpha: float = 0.05) -> dict[str, Any]:
    """The next `budget` pairs to grade and the interval expected once they are: the design's expected
    half-width z sqrt(Σ (1 − π_q)/π_q u_q) / N at the threshold those pairs reach (plus the spread of f̂ over
    queries for the population estimand). Writes each pair's π for that threshold into pairs.jsonl."""
    study = read_study(study_dir)
    human = read_labels(study.path).human_grades()
    a = _arrays(study, human)
    pool = a["pool"]
    w, keys = _queue(study, a)
    complete = _complete(a)
    unlabelled = np.sum(pool.mask & np.isnan(pool.gather(a["human"], fill=0.0)), axis=1)
    t = queue_threshold(keys, unlabelled, budget, done=complete)
    pi = inclusion(w, t)
    for q, row in enumerate(pool.pair_ids):
        for pid in row[row >= 0]:
            study.pairs[int(pid)]["pi"] = float(pi[q])
    study.save_pairs()
    u = _uncertainty(study, a)
    decision = study.meta.get("decision")
    llm_vals = ps.target(ps.scores(pool, pool.gather(a["llm"])), study.systems, decision)
    spread = lambda f: float(np.var(f)) if study.meta.get("estimand", "population") == "population" else 0.0  # noqa: E731
    current = estimate_study(study.path, alpha)
    expected: dict[str, Any] = {}
    if decision:
        expected["difference"] = expected_half_width(u, pi, alpha, spread(llm_vals))
    else:
        for s, name in enumerate(study.systems):
            expected[name] = expected_half_width(u[s], pi, alpha, spread(llm_vals[s]))
    plan = {"pairs": next_pairs(study.path, "", budget), "threshold": t, "expected_half_width": expected}
    return json_safe({**plan, "current": current})
