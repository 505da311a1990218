"""Prediction-powered means: equal to the authors' package, and honest with a synthetic judge on SciFact.

The synthetic judge labels the top 10 of real BM25 runs over the SciFact test split: its label for a
(query, document) pair is the human qrels grade, flipped with a known probability (seeded, the same flip
for a document both systems retrieved). The metric is MRR@10, which a judge of the retrieved documents
alone can compute; the human per-query values are checked against retbench's own evaluation first.
"""

from __future__ import annotations

import numpy as np
import ppi_py
import pytest

from retbench.errors import InputError
from retbench.evaluation import evaluate
from retbench.retrievers import create
from retbench.stats.ppi import classical_mean_ci, ppi_estimate, ppi_lambda, ppi_mean, ppi_mean_diff

SYSTEMS = {
    "bm25": {"k1": 1.5, "b": 0.75, "stopwords": "en", "stemmer": "english"},
    "bm25_weak": {"k1": 0.3, "b": 1.0, "stopwords": None, "stemmer": None},
}
DEPTH = 10
TRIALS = 500
LABELLED = 100  # of the 300 test queries carry human labels in each trial; the others LLM labels only


def reciprocal_rank(labels: np.ndarray) -> np.ndarray:
    """RR@10 from binary labels by rank (last axis): 1 / rank of the first relevant document, else 0."""
    hit = labels.any(axis=-1)
    return np.where(hit, 1.0 / (labels.argmax(axis=-1) + 1), 0.0)


@pytest.fixture(scope="module")
def pools(scifact):
    """Per system: the top-10 pool as (pair ids, human labels), and the per-query MRR@10 under human labels."""
    qrels = scifact.split("test")
    qids = list(qrels)
    pair_ids: dict[tuple[int, str], int] = {}
    out = {}
    for name, params in SYSTEMS.items():
        retriever = create("bm25s", params)
        retriever.index(scifact.corpus)
        run = retriever.search(scifact.queries.subset(qids), DEPTH)
        uid = np.full((len(qids), DEPTH), -1, dtype=np.int64)
        human = np.zeros((len(qids), DEPTH), dtype=bool)
        for i, q in enumerate(qids):
            for r, doc in enumerate(run.docs(q)[:DEPTH]):
                uid[i, r] = pair_ids.setdefault((i, doc), len(pair_ids))
                human[i, r] = qrels[q].get(doc, 0) > 0
        values = reciprocal_rank(human)
        mrr = evaluate(run, qrels, ["mrr@10"]).values[:, 0]
        np.testing.assert_allclose(values, mrr, atol=1e-12)  # the human values are retbench's own MRR@10
        out[name] = (uid, human, values)
    return out, len(pair_ids)


def judge(pools, flip: float, seed: int = 0) -> dict[str, np.ndarray]:
    """[TRIALS, queries] MRR@10 per system under the synthetic judge (a fraction `flip` of grades flipped)."""
    systems, n_pairs = pools
    flips = np.random.default_rng(seed).random((TRIALS, n_pairs)) < flip
    out = {}
    for name, (uid, human, _) in systems.items():
        labels = human[None] ^ (flips[:, np.maximum(uid, 0)] & (uid >= 0))
        out[name] = reciprocal_rank(labels)
    return out


def splits(n: int, seed: int = 1) -> np.ndarray:
    """[TRIALS, n] query orders: the first LABELLED carry human labels in that trial."""
    return np.argsort(np.random.default_rng(seed).random((TRIALS, n)), axis=1)


# -- the estimator equals the authors' package ----------------------------------------------------------
@pytest.mark.parametrize("lam", [1.0, None, 0.0, 0.4])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_ppi_mean_equals_ppi_py_on_the_same_inputs(pools, lam, alpha):
    human = pools[0]["bm25"][2]
    llm = judge(pools, 0.2)["bm25"][0]
    order = splits(human.size)[0]
    lab, unl = order[:LABELLED], order[LABELLED:]
    est, low, high = ppi_mean(human[lab], llm[lab], llm[unl], alpha=alpha, lam=lam)
    ref = float(np.squeeze(ppi_py.ppi_mean_pointestimate(human[lab], llm[lab], llm[unl], lam=lam)))
    ref_low, ref_high = (
        float(np.squeeze(x)) for x in ppi_py.ppi_mean_ci(human[lab], llm[lab], llm[unl], alpha=alpha, lam=lam)
    )
    assert est == pytest.approx(ref, abs=1e-9)
    assert low == pytest.approx(ref_low, abs=1e-9)
    assert high == pytest.approx(ref_high, abs=1e-9)
    assert low < est < high


def test_power_tuned_lambda_and_the_classical_interval_equal_ppi_py(pools):
    human = pools[0]["bm25"][2]
    llm = judge(pools, 0.1)["bm25"][3]
    order = splits(human.size)[3]
    lab, unl = order[:LABELLED], order[LABELLED:]
    # ppi_py does not return its lam; the point estimate it gives with lam=None is ours with our lam
    lam = ppi_lambda(human[lab], llm[lab], llm[unl])
    assert 0.0 < lam < 1.0
    tuned = float(np.squeeze(ppi_py.ppi_mean_pointestimate(human[lab], llm[lab], llm[unl], lam=None)))
    assert ppi_estimate(human[lab], llm[lab], llm[unl], lam=lam).estimate == pytest.approx(tuned, abs=1e-9)
    mean, low, high = classical_mean_ci(human[lab], alpha=0.05)
    ref_low, ref_high = ppi_py.classical_mean_ci(human[lab], alpha=0.05)
    assert (low, high) == (pytest.approx(ref_low, abs=1e-9), pytest.approx(ref_high, abs=1e-9))
    # lam = 0 ignores the judge: the human-only interval
    assert ppi_mean(human[lab], llm[lab], llm[unl], lam=0.0) == pytest.approx((mean, low, high), abs=1e-12)


def test_paired_difference_is_ppi_on_per_query_deltas_and_equals_ppi_py(pools):
    (a, b) = (pools[0][s][2] for s in SYSTEMS)
    judged = judge(pools, 0.1)
    fa, fb = judged["bm25"][5], judged["bm25_weak"][5]
    order = splits(a.size)[5]
    lab, unl = order[:LABELLED], order[LABELLED:]
    got = ppi_mean_diff(a[lab], b[lab], fa[lab], fb[lab], fa[unl], fb[unl], alpha=0.05)
    y, f, fu = b[lab] - a[lab], fb[lab] - fa[lab], fb[unl] - fa[unl]
    ref = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=1)))
    ref_low, ref_high = (float(np.squeeze(x)) for x in ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=1))
    assert got == pytest.approx((ref, ref_low, ref_high), abs=1e-9)


# -- coverage and width with a judge of known quality ---------------------------------------------------
@pytest.mark.parametrize("lam", [1.0, None], ids=["PPI", "PPI++"])
@pytest.mark.parametrize("flip", [0.1, 0.5])
def test_ppi_interval_covers_the_all_human_mean_in_at_least_94_percent_of_500_trials(pools, flip, lam):
    human = pools[0]["bm25"][2]
    llm = judge(pools, flip)["bm25"]
    truth = float(human.mean())
    covered = 0
    for t, order in enumerate(splits(human.size)):
        lab, unl = order[:LABELLED], order[LABELLED:]
        _, low, high = ppi_mean(human[lab], llm[t, lab], llm[t, unl], lam=lam)
        covered += low <= truth <= high
    assert covered / TRIALS >= 0.94


def mean_widths(pools, flip: float, lam: float | None = 1.0) -> tuple[float, float]:
    """(PPI, human-only) interval widths averaged over the trials."""
    human = pools[0]["bm25"][2]
    llm = judge(pools, flip)["bm25"]
    ppi, alone = [], []
    for t, order in enumerate(splits(human.size)):
        lab, unl = order[:LABELLED], order[LABELLED:]
        _, low, high = ppi_mean(human[lab], llm[t, lab], llm[t, unl], lam=lam)
        _, hlow, hhigh = classical_mean_ci(human[lab])
        ppi.append(high - low)
        alone.append(hhigh - hlow)
    return float(np.mean(ppi)), float(np.mean(alone))


def test_a_good_judge_narrows_the_interval_and_a_useless_one_does_not(pools):
    good, alone = mean_widths(pools, 0.1)
    useless, _ = mean_widths(pools, 0.5)  # half the grades flipped: labels independent of the truth
    assert good < alone
    assert useless > alone
    tuned_good, _ = mean_widths(pools, 0.1, lam=None)
    tuned_useless, _ = mean_widths(pools, 0.5, lam=None)
    assert tuned_good <= good  # PPI++ is never wider than PPI ...
    assert tuned_useless == pytest.approx(alone, rel=0.02)  # ... and falls back to the human labels


def test_paired_difference_covers_the_all_human_difference(pools):
    a, b = (pools[0][s][2] for s in SYSTEMS)
    judged = judge(pools, 0.1, seed=2)
    truth = float((b - a).mean())
    covered = 0
    for t, order in enumerate(splits(a.size, seed=3)):
        lab, unl = order[:LABELLED], order[LABELLED:]
        fa, fb = judged["bm25"][t], judged["bm25_weak"][t]
        _, low, high = ppi_mean_diff(a[lab], b[lab], fa[lab], fb[lab], fa[unl], fb[unl])
        covered += low <= truth <= high
    assert covered / TRIALS >= 0.94


# -- bad input ------------------------------------------------------------------------------------------
def test_bad_inputs_name_the_argument():
    with pytest.raises(InputError, match="same queries") as err:
        ppi_mean([0.1, 0.2, 0.3], [0.1, 0.2], [0.5])
    assert err.value.field == "llm_on_labelled"
    with pytest.raises(InputError, match="NaN") as err:
        ppi_mean([0.1, 0.2], [0.1, 0.2], [0.5, float("nan")])
    assert err.value.field == "llm_on_unlabelled"
    with pytest.raises(InputError, match="at least 2"):
        ppi_mean([0.1], [0.1], [0.5])
    with pytest.raises(InputError, match="system A has 2 values, system B 3"):
        ppi_mean_diff([0, 1], [0, 1, 1], [0, 1], [0, 1], [1], [1])


# -- the human-label budget ---------------------------------------------------------------------------
def test_the_human_label_budget_gives_the_width_of_the_human_labels_alone(pools):
    """Budget from one trial's doubly labelled queries; checked by the widths over all 500 trials."""
    from retbench.power import ppi_labels_needed

    human = pools[0]["bm25"][2]
    orders = splits(human.size)
    lab = orders[0][:LABELLED]
    unlabelled = human.size - LABELLED
    good = judge(pools, 0.1)["bm25"]
    need = ppi_labels_needed(human[lab], good[0, lab], unlabelled, LABELLED)
    assert need is not None and need < LABELLED  # a good judge saves human labels
    ppi, alone = [], []
    for t, order in enumerate(orders):
        _, low, high = ppi_mean(human[order[:need]], good[t, order[:need]], good[t, order[LABELLED:]])
        _, hlow, hhigh = classical_mean_ci(human[order[:LABELLED]])
        ppi.append(high - low)
        alone.append(hhigh - hlow)
    assert np.mean(ppi) == pytest.approx(np.mean(alone), rel=0.05)
    useless = judge(pools, 0.5)["bm25"]
    worse = ppi_labels_needed(human[lab], useless[0, lab], unlabelled, LABELLED)
    assert worse is None or worse > LABELLED
