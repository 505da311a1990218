"""The metric engine agrees with trec_eval (through pytrec_eval, which embeds trec_eval's C code) to 1e-9.

Random graded qrels and runs with ties (scores exact in float32, since pytrec_eval keeps scores as
32-bit floats), doc ids whose string order differs from their numeric order (trec_eval breaks
ties by doc id descending, as strings), judged queries the system did not answer, empty rankings,
negative grades and queries with no relevant document.
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retbench.data import Qrels, Run
from retbench.evaluation import evaluate

# (trec_eval output name, retbench name). pytrec_eval is asked for measures with their default cutoffs
# (P/recall/ndcg_cut/map_cut at 5, 10, 15, 20, 30, ...; success at 1, 5, 10).
CUTS = (5, 10, 15, 20, 30)
PAIRS = [
    *[(f"P_{k}", f"P@{k}") for k in CUTS],
    *[(f"recall_{k}", f"recall@{k}") for k in CUTS],
    *[(f"success_{k}", f"hit@{k}") for k in (1, 5, 10)],
    *[(f"ndcg_cut_{k}", f"ndcg@{k}") for k in CUTS],
    *[(f"map_cut_{k}", f"map@{k}") for k in (5, 10)],
    ("ndcg", "ndcg"),
    ("map", "map"),
    ("recip_rank", "mrr"),
    ("Rprec", "rprec"),
]
REQUEST = {"P", "recall", "success", "ndcg_cut", "map_cut", "ndcg", "map", "recip_rank", "Rprec"}



def _serve(conn) -> None:
    while True:
        qrels, run, measures, level = conn.recv()
        conn.send(pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=level).evaluate(run))


class Oracle:
    """pytrec_eval in a child process, restarted when it stalls.

    pytrec_eval (pytrec-eval-terrier 0.5.11) now and then never returns from `evaluate` (seen with
    measure sets such as {map, ndcg}, after other evaluators were built in the same process; the same
    input evaluates at once in a fresh process): a pytrec_eval bug, not a property of the measures.
    """

    def __init__(self) -> None:
        self.proc = None
        self.conn = None

    def _start(self) -> None:
        ctx = mp.get_context("fork")  # starts at once (spawn would import this module again in the child)
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()

    def __call__(self, qrels, run, measures=None, level=1):
        for wait in (3, 10, 30):  # a stall is forever; a loaded 2-core machine is only slow, so wait longer each try
            if self.proc is None:
                self._start()
            self.conn.send((qrels, run, measures or REQUEST, level))
            if self.conn.poll(wait):
                return self.conn.recv()
            self.close()
        raise RuntimeError("pytrec_eval stalled three times on the same input")

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
        self.proc = self.conn = None


ORACLE = Oracle()


@pytest.fixture(scope="module", autouse=True)
def _stop_oracle():
    yield
    ORACLE.close()


DOCS = [f"d{i}" for i in range(25)]  # "d10" < "d2" as strings: tie order is not numeric order


@st.composite
def qrels_and_run(draw):
    n_q = draw(st.integers(1, 8))
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_q):
        qid = f"q{q}"
        judged = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=10, unique=True))
        qrels[qid] = {d: draw(st.integers(-1, 3)) for d in judged}
        answer = draw(st.sampled_from(["full", "full", "full", "missing", "empty"]))
        if answer == "missing":
            continue
        ranked = [] if answer == "empty" else draw(st.lists(st.sampled_from(DOCS), max_size=20, unique=True))
        # quarter steps in [0, 4]: exact in float32, and plenty of ties
        run[qid] = {d: draw(st.integers(0, 16)) / 4.0 for d in ranked}
    # a query the system answered that nobody judged: ignored by both
    run["unjudged"] = {"d1": 1.0}
    return qrels, run


def _ours(qrels, run, level, mode):
    names = [ours for _, ours in PAIRS]
    return evaluate(Run.from_dict(run), Qrels(qrels), names, relevance_level=level, no_relevant="zero", mode=mode)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run(), level=st.sampled_from([1, 2]))
def test_every_shared_measure_matches_pytrec_eval(data, level):
    qrels, run = data
    theirs = ORACLE(qrels, run, level=level)
    ev = _ours(qrels, run, level, "trec_eval")
    assert ev.query_ids == list(qrels)
    for trec_name, name in PAIRS:
        col = dict(zip(ev.query_ids, ev.column(name).tolist(), strict=True))
        for qid in qrels:
            expected = theirs[qid][trec_name] if qid in theirs else 0.0  # trec_eval -c: unanswered is 0
            assert col[qid] == pytest.approx(expected, abs=1e-9), (name, qid)
        # trec_eval -c averages over all judged queries
        assert ev.mean(name) == pytest.approx(sum(col.values()) / len(qrels), abs=1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run())
def test_pytrec_eval_mode_averages_over_the_queries_pytrec_eval_returns(data):
    qrels, run = data
    theirs = ORACLE(qrels, run)
    ev = _ours(qrels, run, 1, "pytrec_eval")
    assert sorted(ev.query_ids) == sorted(theirs)
    assert sorted(ev.excluded) == sorted(set(qrels) - set(theirs))
    for trec_name, name in PAIRS:
        if not theirs:
            assert np.isnan(ev.mean(name))
            continue
        expected = float(np.mean([v[trec_name] for v in theirs.values()]))
        assert ev.mean(name) == pytest.approx(expected, abs=1e-9), name


def test_trec_eval_names_parse_to_the_same_measures():
    qrels = {"q": {"a": 2, "b": 1, "c": 0}}
    run = {"q": {"c": 3.0, "b": 2.0, "x": 1.5, "a": 1.0}}
    ours = evaluate(Run.from_dict(run), Qrels(qrels), [t for t, _ in PAIRS])
    assert ours.metrics == [name for _, name in PAIRS]
    assert ours.trec_names == [t for t, _ in PAIRS]
    theirs = ORACLE(qrels, run)["q"]
    for trec_name, name in PAIRS:
        assert ours.mean(name) == pytest.approx(theirs[trec_name], abs=1e-12)


def test_scifact_run_matches_pytrec_eval(scifact):
    """A real run: SciFact test qrels, every test query ranked over all 5,183 docs by a simple word-overlap score."""
    qrels = scifact.split("test")
    corpus = scifact.corpus
    postings: dict[str, list[int]] = {}
    for i, text in enumerate(corpus.joined_texts()):
        for w in set(text.lower().split()):
            postings.setdefault(w, []).append(i)
    n = len(corpus)
    run: dict[str, dict[str, float]] = {}
    for q in qrels:
        scores = np.zeros(n)
        for w in set(scifact.queries[q].lower().split()):
            docs = postings.get(w)
            if docs:
                scores[docs] += np.log((n + 1) / (len(docs) + 1))
        top = np.argsort(-scores, kind="stable")[:100]
        # rounded to float32-exact steps: real ties, as BM25 runs on short queries have
        run[q] = {corpus.ids[i]: float(np.float32(round(float(scores[i]), 1))) for i in top}
    theirs = ORACLE(qrels.to_dict(), run)
    ev = evaluate(Run.from_dict(run), qrels, [name for _, name in PAIRS])
    assert len(ev.query_ids) == 300 and not ev.skipped
    for trec_name, name in PAIRS:
        expected = np.array([theirs[q][trec_name] for q in ev.query_ids])
        np.testing.assert_allclose(ev.column(name), expected, rtol=0, atol=1e-9, err_msg=name)
    assert 0.3 < ev.mean("ndcg@10") < 0.8  # a sane run, not a degenerate one
