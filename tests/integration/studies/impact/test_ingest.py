"""Ingestion impact without a model: worked examples, and the incremental engine against FAISS rebuilds.

Vectors with entries that are multiples of 1/8 make every inner product exact in float32 whatever the
summation order, so ties are real ties and "equal to a rebuild, doc for doc" can be checked exactly,
tie-breaking (score desc, then doc id desc) included.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter

import faiss
import numpy as np
import pytest
from pydantic import TypeAdapter

from retbench.chunkers import make_chunker
from retbench.config.impact import CandidateSource
from retbench.data import Corpus, Qrels, Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.studies.impact import (
    ContextRecall,
    CosineSupport,
    DenseImpact,
    GainWeights,
    Impact,
    Novelty,
    NoveltyIndex,
    build_candidates,
    candidate_status,
    gain_weights,
    near_duplicate,
    parse_ingest_config,
    rank_specs,
    split_sentences,
)

METRICS = ["recall@3", "ndcg@5", "mrr@5", "P@2"]


class BagEncoder:
    """Bag-of-words vectors: cosines are word overlaps, computable by hand."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.calls = 0

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(64, dtype=np.float32)
        for w in re.findall(r"\w+", text.lower()):
            v[self.vocab.setdefault(w, len(self.vocab))] += 1.0
        return v

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, 64), dtype=np.float32)

    encode_queries = encode_documents

    def describe(self) -> dict[str, str]:
        return {"model": "bag-of-words"}


# -- worked example ---------------------------------------------------------------------------------
def _tiny() -> DenseImpact:
    # K: a, b, c in 2-D; q1 looks along x, q2 along y. Relevant: q1 -> d (a candidate), q2 -> c.
    kb = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    Q = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    qrels = Qrels({"q1": {"d": 1}, "q2": {"c": 1}})
    return DenseImpact(["a", "b", "c"], ["q1", "q2"], Q, qrels, ["recall@1", "ndcg@2", "mrr@2"], kb_vectors=kb)


def test_worked_example_alone():
    eng = _tiny()
    # with K: q1 ranks a, b (no relevant doc): 0 everywhere; q2 ranks c first: 1 everywhere
    assert eng.before == {"recall@1": 0.5, "ndcg@2": 0.5, "mrr@2": 0.5}
    # d = (0.96, 0.28): q1 scores it 0.96, second after a (1.0); q2 scores it 0.28 < b's 0.6: unchanged
    # "e" duplicates a's vector: tie at 1.0 on q1 and id "e" > "a" wins it (trec_eval order)
    # "0" duplicates a too but loses the tie, so it is second and pushes b out
    cands = np.array([[0.96, 0.28], [1.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    d, e, zero = eng.alone(["d", "e", "0"], cands)
    assert d.deltas["recall@1"] == 0.0
    assert d.deltas["ndcg@2"] == pytest.approx((1 / math.log2(3)) / 2)  # q1: 0 -> 1/log2(3), averaged over 2 queries
    assert d.deltas["mrr@2"] == pytest.approx(0.25)  # q1: 0 -> 1/2
    assert d.changed == ["q1"] and d.gained == ["q1"] and d.lost == []
    assert d.own_queries == ["q1"] and d.own_deltas["mrr@2"] == pytest.approx(0.5)
    assert e.changed == ["q1"] and e.deltas == {"recall@1": 0.0, "ndcg@2": 0.0, "mrr@2": 0.0}
    assert eng.after_run(["e"], cands[1:2]).docs("q1") == ["e", "a"]
    assert eng.after_run(["0"], cands[2:3]).docs("q1") == ["a", "0"]
    assert zero.changed == ["q1"]
    # gain with the default weights: alpha * drecall + beta * dCR (none) + gamma * novelty
    d.novelty = Novelty(min=0.3, mean=0.4, max_cos=0.7, nearest_doc="a", nearest_chunk="a")
    assert GainWeights(alpha=1, beta=1, gamma=0.1, recall="recall@1").apply(d) == pytest.approx(0.03)
    assert GainWeights(alpha=1, beta=1, gamma=0.1, recall="ndcg@2", novelty="mean").apply(d) == pytest.approx(
        (1 / math.log2(3)) / 2 + 0.04
    )


def test_worked_example_skip_and_leave_one_out():
    eng = _tiny()
    cands = np.array([[0.96, 0.28]], dtype=np.float32)
    (d,) = eng.alone(["d"], cands, skip=[True])
    assert d.deltas == {"recall@1": 0.0, "ndcg@2": 0.0, "mrr@2": 0.0} and d.changed == []
    a, c = eng.leave_one_out(["a", "c"])
    assert a.deltas == {"recall@1": 0.0, "ndcg@2": 0.0, "mrr@2": 0.0} and a.changed == ["q1"]
    # without c, q2 ranks b then a: c was worth recall 1 -> 0 on q2, i.e. 0.5 on the mean
    assert c.deltas == {"recall@1": 0.5, "ndcg@2": 0.5, "mrr@2": 0.5} and c.lost == [] and c.gained == ["q2"]


# -- exactness against FAISS rebuilds ---------------------------------------------------------------
def _dyadic(rng: np.random.Generator, n: int, dim: int = 12) -> np.ndarray:
    return (rng.integers(-8, 9, size=(n, dim)) / 8.0).astype(np.float32)


def _faiss_run(ids: list[str], vecs: np.ndarray, qids: list[str], Q: np.ndarray, depth: int) -> Run:
    index = faiss.IndexFlatIP(vecs.shape[1])
    index.add(np.ascontiguousarray(vecs))
    n = min(len(ids), depth + 40)  # deep enough that a tie across the cut is fully seen
    scores, labels = index.search(np.ascontiguousarray(Q), n)
    results = {
        q: [(ids[j], float(s)) for j, s in zip(labels[i], scores[i], strict=True) if j >= 0] for i, q in enumerate(qids)
    }
    return Run.from_dict(results).truncate(depth)


@pytest.fixture(scope="module")
def synthetic():
    rng = np.random.default_rng(7)
    n_kb, n_q, n_c = 400, 60, 40
    kb = _dyadic(rng, n_kb)
    kb[10:20] = kb[0:10]  # exact duplicate vectors under other ids: ties everywhere they rank
    kb_ids = [f"d{i:03d}" for i in range(n_kb)]
    cands = _dyadic(rng, n_c)
    cands[:6] = kb[:6]  # candidates tied with K documents, ids above and below theirs
    cand_ids = [f"c{i:02d}" if i % 2 else f"z{i:02d}" for i in range(n_c)]
    Q = _dyadic(rng, n_q)
    qids = [f"q{i}" for i in range(n_q)]
    py = random.Random(3)
    qrels = {}
    for q in qids[:-3]:  # the last three queries judge nothing: skipped, as trec_eval does
        pool = [*kb_ids, *cand_ids]
        qrels[q] = {d: py.choice([1, 1, 2]) for d in py.sample(pool, py.randint(1, 4))}
    qrels[qids[-3]] = {kb_ids[0]: 0}
    # make several candidates relevant where they will rank
    S = Q @ cands.T
    for c in range(0, n_c, 3):
        q = qids[int(np.argmax(S[:-3, c]))]
        qrels[q][cand_ids[c]] = 2
    return kb_ids, kb, cand_ids, cands, qids, Q, Qrels(qrels)


def _means(run: Run, qrels: Qrels, metrics: list[str]) -> dict[str, float]:
    ev = evaluate(run, qrels, metrics)
    return {m: ev.mean(m) for m in ev.metrics}


def test_incremental_equals_rebuild_doc_for_doc(synthetic):
    kb_ids, kb, cand_ids, cands, qids, Q, qrels = synthetic
    eng = DenseImpact(kb_ids, qids, Q, qrels, METRICS, kb_vectors=kb)
    depth = eng.depth
    assert eng.skipped == [qids[-3]] and eng.n == len(qids) - 3
    base = _faiss_run(kb_ids, kb, eng.qids, eng.Q, depth)
    assert [eng.run().docs(q) for q in eng.qids] == [base.docs(q) for q in eng.qids]
    before = _means(base, qrels, METRICS)
    assert eng.before == pytest.approx(before, abs=1e-12)
    impacts = eng.alone(cand_ids, cands)
    n_changed = 0
    for c, imp in enumerate(impacts):
        ref = _faiss_run([*kb_ids, cand_ids[c]], np.vstack([kb, cands[c : c + 1]]), eng.qids, eng.Q, depth)
        mine = eng.after_run([cand_ids[c]], cands[c : c + 1])
        assert [mine.docs(q) for q in eng.qids] == [ref.docs(q) for q in eng.qids], cand_ids[c]
        assert np.allclose(mine.scores, ref.scores)
        after = _means(ref, qrels, METRICS)
        for m in METRICS:
            assert imp.deltas[m] == pytest.approx(after[m] - before[m], abs=1e-12), (cand_ids[c], m)
        assert sorted(imp.changed) == sorted(q for q in eng.qids if ref.docs(q) != base.docs(q))
        n_changed += bool(imp.changed)
    assert n_changed > 10  # the check above is not vacuous
    assert any(imp.own_deltas.get("recall@3", 0) > 0 for imp in impacts)


def test_sequential_equals_cumulative_rebuild(synthetic):
    kb_ids, kb, cand_ids, cands, qids, Q, qrels = synthetic
    eng = DenseImpact(kb_ids, qids, Q, qrels, METRICS, kb_vectors=kb)
    skip = [i % 7 == 3 for i in range(len(cand_ids))]
    impacts = eng.sequential(cand_ids, cands, skip)
    added = [c for c, s in zip(range(len(cand_ids)), skip, strict=True) if not s]
    ref = _faiss_run(
        [*kb_ids, *(cand_ids[c] for c in added)], np.vstack([kb, cands[added]]), eng.qids, eng.Q, eng.depth
    )
    final = _means(ref, qrels, METRICS)
    assert impacts[-1].after == pytest.approx(final, abs=1e-12)
    # per-step deltas add up to the whole change, and skipped candidates change nothing
    for m in METRICS:
        assert sum(i.deltas[m] for i in impacts) == pytest.approx(final[m] - eng.before[m], abs=1e-12)
    assert all(not impacts[c].changed and impacts[c].deltas["ndcg@5"] == 0 for c in range(len(skip)) if skip[c])
    # step 5 against K plus the first four candidates
    first = [c for c in added if c < 5]
    step_before = _faiss_run(
        [*kb_ids, *(cand_ids[c] for c in first[:-1])], np.vstack([kb, cands[first[:-1]]]), eng.qids, eng.Q, eng.depth
    )
    step_after = _faiss_run(
        [*kb_ids, *(cand_ids[c] for c in first)], np.vstack([kb, cands[first]]), eng.qids, eng.Q, eng.depth
    )
    b, a = _means(step_before, qrels, METRICS), _means(step_after, qrels, METRICS)
    assert impacts[first[-1]].deltas["ndcg@5"] == pytest.approx(a["ndcg@5"] - b["ndcg@5"], abs=1e-12)
    # the engine's base state is untouched by a sequential pass
    assert (
        eng.alone(cand_ids[:3], cands[:3])[0].deltas
        == DenseImpact(kb_ids, qids, Q, qrels, METRICS, kb_vectors=kb).alone(cand_ids[:3], cands[:3])[0].deltas
    )


def test_leave_one_out_equals_rebuild_without_the_document(synthetic):
    kb_ids, kb, _, _, qids, Q, qrels = synthetic
    eng = DenseImpact(kb_ids, qids, Q, qrels, METRICS, kb_vectors=kb)
    base = eng.run()
    # the documents that rank most often, so removals change many rows
    counts: dict[str, int] = {}
    for q in eng.qids:
        for d in base.docs(q):
            counts[d] = counts.get(d, 0) + 1
    docs = [*sorted(counts, key=lambda d: (-counts[d], d))[:12], "d399"]
    impacts = eng.leave_one_out(docs)
    before = eng.before
    for d, imp in zip(docs, impacts, strict=True):
        keep = [i for i, x in enumerate(kb_ids) if x != d]
        ref = _faiss_run([kb_ids[i] for i in keep], kb[keep], eng.qids, eng.Q, eng.depth)
        without = _means(ref, qrels, METRICS)
        for m in METRICS:
            assert imp.deltas[m] == pytest.approx(before[m] - without[m], abs=1e-12), (d, m)
        assert sorted(imp.changed) == sorted(q for q in eng.qids if ref.docs(q) != base.docs(q))


def _brute_run(ids: list[str], vecs: np.ndarray, qids: list[str], Q: np.ndarray, depth: int) -> Run:
    """Exact float64 scores per pair (identical vectors tie exactly), trec_eval order by the Run."""
    s = (Q.astype(np.float64)[:, None, :] * vecs.astype(np.float64)[None, :, :]).sum(-1)
    return Run.from_dict({q: list(zip(ids, s[i].tolist(), strict=True)) for i, q in enumerate(qids)}).truncate(depth)


def test_real_valued_vectors_match_faiss_rebuild():
    rng = np.random.default_rng(1)
    kb = rng.normal(size=(300, 32)).astype(np.float32)
    kb /= np.linalg.norm(kb, axis=1, keepdims=True)
    cands = rng.normal(size=(25, 32)).astype(np.float32)
    cands /= np.linalg.norm(cands, axis=1, keepdims=True)
    cands[:8] = kb[rng.choice(300, 8, replace=False)]  # copies of K vectors: real-valued exact ties
    Q = rng.normal(size=(40, 32)).astype(np.float32)
    ids = [str(i) for i in range(300)]
    qids = [f"q{i}" for i in range(40)]
    qrels = Qrels({q: {str(rng.integers(300)): 1, f"c{i}": 1} for i, q in enumerate(qids)})
    eng = DenseImpact(ids, qids, Q, qrels, ["ndcg@10", "recall@20"], kb_vectors=kb)
    assert [eng.run().docs(q) for q in eng.qids] == [_brute_run(ids, kb, eng.qids, eng.Q, 20).docs(q) for q in eng.qids]
    cids = [f"c{i}" for i in range(25)]
    n_tied = 0
    for c in range(25):
        ref = _brute_run([*ids, cids[c]], np.vstack([kb, cands[c : c + 1]]), eng.qids, eng.Q, eng.depth)
        mine = eng.after_run([cids[c]], cands[c : c + 1])
        assert [mine.docs(q) for q in eng.qids] == [ref.docs(q) for q in eng.qids]
        n_tied += c < 8 and any(cids[c] in mine.docs(q) for q in eng.qids)
    assert n_tied >= 3  # copies did enter some top-20s, tied with their originals


# -- novelty ------------------------------------------------------------------------------------------
def test_novelty_worked_example():
    kb = Corpus(["k1", "k2"], ["alpha beta", "gamma delta"], join_rule="text_only")
    idx = NoveltyIndex(BagEncoder())
    idx.add(kb)
    cands = Corpus(["same", "mixed", "new"], ["alpha beta", "alpha beta gamma", "omega"], join_rule="text_only")
    same, mixed, new = idx.novelty(cands)
    assert same.min == pytest.approx(0.0, abs=1e-6) and same.nearest_doc == "k1"
    # cos("alpha beta gamma", "alpha beta") = 2 / (sqrt 3 sqrt 2)
    assert mixed.min == pytest.approx(1 - 2 / math.sqrt(6), abs=1e-6) and mixed.nearest_doc == "k1"
    assert new.min == pytest.approx(1.0) and new.max_cos == pytest.approx(0.0)
    # sequential: "new" comes after a first "omega" candidate, so it is no longer new
    seq = idx.novelty(
        Corpus(["o1", "o2", "o3"], ["omega", "omega", "omega psi"], join_rule="text_only"),
        sequential=[True, False, True],
    )
    assert seq[0].min == pytest.approx(1.0)
    assert seq[1].min == pytest.approx(0.0, abs=1e-6) and seq[1].nearest_doc == "o1"
    assert seq[2].min == pytest.approx(1 - 1 / math.sqrt(2), abs=1e-6) and seq[2].nearest_doc == "o1"
    # leave-one-out: compared with the rest of K, never with itself
    (k1,) = idx.novelty(kb.subset(["k1"]), leave_one_out=True)
    assert k1.min == pytest.approx(1.0) and k1.nearest_doc == "k2"


def test_novelty_per_chunk_with_a_chunker():
    kb = Corpus(["k1", "k2"], ["alpha beta.", "gamma delta. alpha beta."], join_rule="text_only")
    idx = NoveltyIndex(BagEncoder(), make_chunker({"kind": "sentences", "size": 1}))
    idx.add(kb)
    (nov,) = idx.novelty(Corpus(["c"], ["alpha beta. epsilon zeta."], join_rule="text_only"))
    assert [c["novelty"] for c in nov.chunks] == pytest.approx([0.0, 1.0], abs=1e-6)
    assert nov.chunks[1]["start"] == 12 and nov.chunks[1]["end"] == 25
    assert nov.min == pytest.approx(0.0, abs=1e-6) and nov.mean == pytest.approx(0.5, abs=1e-6)
    assert nov.nearest_chunk in ("k1#0", "k2#1")
    # leave-one-out on a document whose sentence also occurs in another document
    (k2,) = idx.novelty(kb.subset(["k2"]), leave_one_out=True)
    assert k2.chunks[0]["novelty"] == pytest.approx(1.0) and k2.chunks[1]["nearest_doc"] == "k1"


# -- context recall -------------------------------------------------------------------------------------
def test_context_recall_worked_example():
    texts = {"x": "Grass is green. Water is wet.", "y": "The sky is blue today.", "z": "Nothing here."}
    cr = ContextRecall(
        {"q": "The sky is blue. Grass is green.", "r": ""},
        texts.__getitem__,
        CosineSupport(BagEncoder(), 0.9),
        context_k=2,
    )
    assert split_sentences("The sky is blue. Grass is green.") == ["The sky is blue.", "Grass is green."]
    assert cr.has("q") and not cr.has("r")  # an empty reference is no reference
    assert cr.score("q", ["x"]) == 0.5
    assert cr.score("q", ["z", "x"]) == 0.5
    # "The sky is blue today." vs "The sky is blue.": cos 4 / (sqrt 5 * 2) = 0.894 < 0.9
    assert cr.score("q", ["x", "y"]) == 0.5
    assert (
        ContextRecall({"q": "The sky is blue."}, texts.__getitem__, CosineSupport(BagEncoder(), 0.89)).score("q", ["y"])
        == 1.0
    )
    assert cr.score("q", ["z", "z", "x"]) == 0.0  # only the first context_k documents count
    assert math.isnan(cr.score("r", ["x"]))


def test_context_recall_deltas_in_the_engine():
    kb = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    texts = {"a": "Nothing relevant.", "b": "Sky talk.", "c": "Grass is green.", "d": "The sky is blue."}
    cr = ContextRecall(
        {"q1": "The sky is blue. Grass is green."}, texts.__getitem__, CosineSupport(BagEncoder(), 0.95), context_k=2
    )
    Q = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    qrels = Qrels({"q1": {"d": 1}, "q2": {"c": 1}})
    eng = DenseImpact(["a", "b", "c"], ["q1", "q2"], Q, qrels, ["recall@1"], kb_vectors=kb, context=cr)
    assert eng.before["context_recall"] == 0.0  # q1's context (a, b) supports neither sentence
    (d,) = eng.alone(["d"], np.array([[0.96, 0.28]], dtype=np.float32))
    assert d.d_context_recall == pytest.approx(0.5)  # (a, d): the sky sentence is now covered; 1 query has references
    (seq,) = eng.sequential(["d"], np.array([[0.96, 0.28]], dtype=np.float32))
    assert seq.d_context_recall == pytest.approx(0.5) and seq.after["context_recall"] == pytest.approx(0.5)


# -- candidates, statuses, config ------------------------------------------------------------------------
def test_near_duplicate_is_light_and_deterministic():
    text = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    a = near_duplicate(text, random.Random(5), edits=3)
    assert a == near_duplicate(text, random.Random(5), edits=3)
    assert a != text
    assert len(text.split()) - 3 <= len(a.split()) <= len(text.split())
    assert Counter(a.lower().split()) <= Counter(text.lower().split())  # swaps, deletions and case flips only


def test_build_candidates_on_scifact(scifact):
    qrels = scifact.split("test")
    qids = list(qrels)
    sources = TypeAdapter(list[CandidateSource]).validate_python(
        [
            {"kind": "gold", "queries": 5, "seed": 1},
            {"kind": "present", "n": 4},
            {"kind": "near_duplicate", "n": 3, "edits": 2},
        ]
    )
    cs = build_candidates(scifact.corpus, qrels, qids, sources, seed=2)
    gold = [c for c, g in zip(cs.candidates.ids, cs.groups, strict=True) if g == "gold"]
    chosen = cs.info["sources"][0]["queries"]
    assert len(chosen) == 5 and set(gold) == {d for q in chosen for d in qrels[q]}
    assert not any(d in cs.kb for d in gold) and len(cs.kb) == len(scifact.corpus) - len(gold)
    present = [c for c, g in zip(cs.candidates.ids, cs.groups, strict=True) if g == "present"]
    nd = [i for i, g in enumerate(cs.groups) if g == "near_duplicate"]
    assert len(present) == 4 and all(p in cs.kb for p in present)
    for i in nd:
        orig = cs.candidates.metadata[i]["near_duplicate_of"]
        assert orig in cs.kb and orig not in present and cs.candidates.ids[i] not in cs.kb
        assert cs.candidates.texts[i] != cs.kb[orig].text
    status, _dup = candidate_status(cs.kb, cs.candidates, "text")
    assert status == ["new"] * len(gold) + ["present"] * 4 + ["new"] * 3
    # an exact copy under a new id is a duplicate with dedupe: text, new with dedupe: id
    copy = Corpus(["copy"], [cs.kb[present[0]].text], [cs.kb[present[0]].title])
    assert candidate_status(cs.kb, copy, "text") == (["duplicate"], [present[0]])
    assert candidate_status(cs.kb, copy, "id")[0] == ["new"]


def _cfg(**over):
    raw = {"dataset": "scifact", "candidates": [{"kind": "holdout", "n": 3}], "metrics": ["recall@10", "ndcg@10"]}
    raw.update(over)
    return parse_ingest_config(raw, "x.yaml")


def test_config_defaults_and_errors():
    cfg = _cfg()
    assert gain_weights(cfg).recall == "recall@10" and cfg.modes == ["alone"] and cfg.dedupe == "text"
    bad = [
        ({"metrics": ["mrr"]}, "metrics"),
        ({"metrics": ["ndcg@10"]}, "gain.recall"),
        ({"candidates": [{"kind": "gold"}]}, "candidates[0].queries"),
        ({"candidates": [{"kind": "holdout", "n": 3, "size": 1}]}, "candidates[0].size"),
        ({"modes": ["alone", "leave_one_out"]}, "leave_one_out"),
        ({"gain": {"alpha": "x"}}, "gain.alpha"),
        ({"surprise": 1}, "surprise"),
    ]
    for over, fld in bad:
        with pytest.raises(ConfigError) as exc:
            _cfg(**over)
        assert exc.value.field == fld, (over, exc.value)
    with pytest.raises(ConfigError, match="not a rank metric"):
        rank_specs(["containment@5"])


def test_impact_serializes():
    imp = Impact("d", "alone", deltas={"recall@10": 0.5}, novelty=Novelty(0.1, 0.2, 0.9, "k", "k", [{"chunk_id": "d"}]))
    assert imp.to_dict(chunks=False)["novelty"] == {
        "min": 0.1,
        "mean": 0.2,
        "max_cos": 0.9,
        "nearest_doc": "k",
        "nearest_chunk": "k",
    }
