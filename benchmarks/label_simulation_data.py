"""The label simulation's inputs: two pooled A/B settings with full human judgements, and the simulated judges.

Settings (each: queries, the pool of two systems' top 10, the humans' grade of every pooled pair, and the truth):
- `scifact`: SciFact test + train queries (their qrels are the people); units are (query, abstract) pairs.
- `chunking`: the shipped chunking set (corpora/chunking_eval: 375 questions over 4 long documents, gold answers
  given as character excerpts). Documents are cut by the recursive chunker (800 characters, no overlap); the
  units are (question, chunk) pairs, and a chunk is relevant (grade 1) when it shares at least one character
  with one of the question's gold excerpts (the spans judge's default rule).
In both, A is bm25s (Lucene scoring, k1 1.2, b 0.75, English stopwords) without stemming and B the same with the
Snowball stemmer, each over the setting's units; pairs are pooled at depth 10 exactly as `retbench label init`
pools (`study.pool_pairs`).

Judges. `dirichlet` (the default): a calibrated judge whose grade probabilities vary pair by pair. For a pair
whose true grade is g its probability vector is drawn as p ~ Dirichlet(A·π + e_g) (π: the pool's base rate of
each grade, e_g the unit vector of g) and its grade is drawn from p. This is the posterior of p given g when
p ~ Dirichlet(A·π) and g ~ p, so P(true grade = h | p) = p_h exactly: the stated probabilities are calibrated.
Given g, the mean of p, and the chance of each judge grade, is the judge's confusion row (A·π + e_g)/(A + 1);
its agreement with the truth (Cohen's kappa, equal to the correlation for binary grades) is 1/(A + 1), so each
judge is named by its kappa: A = 1/kappa − 1, and kappa 0 is a judge that states the base rate for every pair
and grades independently of the truth. `confusion`: the earlier judge, a grade drawn from a fixed confusion
matrix row P(judge grade | true grade) and the posterior P(true | judge grade) under the base rate as its
probabilities (the same for every pair with the same judge grade).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retbench.api import evaluate
from retbench.chunkers import make_chunker
from retbench.data import Corpus, Queries
from retbench.data.qrels import Qrels
from retbench.io.chunking_eval import read_chunking_eval
from retbench.io.datasets import load_dataset
from retbench.retrievers import create
from retbench.studies.labels import pool_scores as ps
from retbench.studies.labels.study import pool_pairs

ROOT = Path(__file__).resolve().parents[1]
K = 10
METRIC = "ndcg@10"
SYSTEMS = {
    "A": {"k1": 1.2, "b": 0.75, "method": "lucene", "stopwords": "en", "stemmer": None},
    "B": {"k1": 1.2, "b": 0.75, "method": "lucene", "stopwords": "en", "stemmer": "english"},
}
#: Dirichlet judges by their agreement with the truth (Cohen's kappa), near the earlier confusion judges' on SciFact (0.67, 0.22, 0)
KAPPA = {"good": 0.7, "mediocre": 0.2, "useless": 0.0}
#: the earlier fixed-confusion judges, P(judge grade | true grade), rows: true grade 0, 1
CONFUSION = {
    "good": np.array([[0.95, 0.05], [0.10, 0.90]]),
    "mediocre": np.array([[0.80, 0.20], [0.35, 0.65]]),
    "useless": np.array([[0.50, 0.50], [0.50, 0.50]]),
}
CHUNKER = {"kind": "recursive", "size": 800, "overlap": 0}


def _folder(name: str, marker: str) -> Path:
    for base in (ROOT / "corpora" / name, Path("/work/shared/corpora") / name):
        if (base / marker).exists():
            return base
    raise SystemExit(f"{name} is not under corpora/{name}")


def _pooled(name: str, corpus: Corpus, queries: Queries, qrels: dict[str, dict[str, int]], units: str) -> dict:
    """Runs of A and B over `corpus`, their pool at depth K, the humans' grades and both truths."""
    qids = [q for q in queries.ids if qrels.get(q)]
    queries = queries.subset(qids)
    runs = []
    for sys_name, params in SYSTEMS.items():
        r = create("bm25s", params, name=sys_name)
        r.index(corpus)
        runs.append(r.search(queries, K))
    pairs = pool_pairs(runs, K, qids)
    pool = ps.pool_arrays(pairs, list(SYSTEMS), "ndcg", K)
    true = np.array([min(1, qrels.get(p["qid"], {}).get(p["doc_id"], 0)) for p in pairs], dtype=np.int64)
    full = {}
    for r in runs:
        ev = evaluate(Qrels({q: qrels[q] for q in pool.qids}), r, [METRIC], no_relevant="zero")
        by_q = dict(zip(ev.query_ids, ev.column(METRIC), strict=True))
        full[r.name] = np.array([by_q.get(q, 0.0) for q in pool.qids])
    pooled_true = ps.scores(pool, pool.gather(true.astype(float)))
    return {
        "name": name,
        "units": units,
        "pool": pool,
        "true": true,
        "full": full,
        "pooled": pooled_true,
        "n_pairs": len(pairs),
        "base_rate": np.bincount(true, minlength=2) / true.size,
    }


def scifact(max_queries: int | None) -> dict:
    ds = load_dataset(_folder("scifact", "qrels"), ["test", "train"])
    qrels = {q: dict(docs) for split in ("test", "train") for q, docs in ds.split(split).to_dict().items()}
    qids = [q for q in qrels if q in ds.queries][:max_queries]
    return _pooled("scifact", ds.corpus, ds.queries.subset(qids), qrels, "(query, abstract) pairs")


def chunking(max_queries: int | None) -> dict:
    ev = read_chunking_eval(_folder("chunking_eval", "questions.jsonl"))
    chunks = make_chunker(CHUNKER).chunk_corpus(ev.corpus)
    qids = list(ev.queries.ids)[:max_queries]
    qrels = {q: {c: 1 for span in ev.spans[q] for c in chunks.overlapping(span)} for q in qids}
    return _pooled("chunking", chunks.to_corpus("chunks"), ev.queries.subset(qids), qrels, "(question, chunk) pairs")


SETTINGS = {"scifact": scifact, "chunking": chunking}


def _categorical(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One grade per row drawn from that row's probabilities."""
    cdf = np.cumsum(probs, axis=1)
    return np.minimum((rng.uniform(size=(probs.shape[0], 1)) > cdf).sum(axis=1), probs.shape[1] - 1)


def dirichlet_judge(true: np.ndarray, base: np.ndarray, kappa: float, rng: np.random.Generator):
    """(grades, probabilities per pair) of the calibrated judge with agreement `kappa` (module docstring)."""
    onehot = np.eye(base.size)[true]
    if kappa <= 0:
        probs = np.broadcast_to(base, onehot.shape).copy()
    else:
        g = rng.gamma(base * (1.0 / kappa - 1.0) + onehot)
        probs = g / g.sum(axis=1, keepdims=True)
    return _categorical(probs, rng), probs


def confusion_judge(true: np.ndarray, base: np.ndarray, conf: np.ndarray, rng: np.random.Generator):
    """(grades, probabilities per pair) of the fixed-confusion judge: the posterior of its grade's row."""
    g = _categorical(conf[true], rng)
    post = base[:, None] * conf  # P(true = h, judge = g')
    post = (post / post.sum(axis=0, keepdims=True)).T  # row g': P(true = h | judge = g')
    return g, post[g]


def judge_draw(model: str, judge: str, s: dict, rng: np.random.Generator):
    if model == "dirichlet":
        return dirichlet_judge(s["true"], s["base_rate"], KAPPA[judge], rng)
    return confusion_judge(s["true"], s["base_rate"], CONFUSION[judge], rng)


def implied_confusion(model: str, judge: str, base: np.ndarray) -> np.ndarray:
    """P(judge grade | true grade) of a judge on a pool with base rate `base`."""
    if model == "confusion":
        return CONFUSION[judge]
    kappa = KAPPA[judge]
    return (1.0 - kappa) * np.broadcast_to(base, (base.size, base.size)) + kappa * np.eye(base.size)
