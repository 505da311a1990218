"""The diversity measures agree with ndeval (pyndeval 0.0.8, through ir_measures' pyndeval provider) to 1e-9.

Inputs: random subtopic qrels (several subtopics per query, grades -1 to 2, documents judged for some
subtopics and not others, queries without any relevant document) and runs with ties, unjudged documents,
empty rankings and judged queries the system did not answer; and a real bm25s run on SciFact's test queries
with subtopics assigned to its judged documents. pyndeval breaks score ties by doc id ascending, retbench
(like trec_eval, gdeval and ndeval's own -traditional order) by doc id descending: pyndeval gets each run in
retbench's order, written as distinct scores, so both score the same ranking.

ir_measures' provider consumes the run once per distinct (rel, alpha, beta) and then scores the next
invocation on an empty run, so each measure is asked for on its own.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bm25_scifact import scifact_bm25
from retbench.data import Run
from retbench.errors import ConfigError, InputError
from retbench.evaluation import evaluate
from retbench.io.subtopics import read_subtopic_qrels
from retbench.metrics.judges.subtopics import SubtopicQrels

ir_measures = pytest.importorskip("ir_measures")
pytest.importorskip("pyndeval")

DOCS = [f"d{i}" for i in range(20)]
SUBTOPICS = ["1", "2", "3", "4"]


@st.composite
def subtopic_qrels_and_run(draw):
    judgements: list[tuple[str, str, str, int]] = []
    run: dict[str, dict[str, float]] = {}
    for q in range(draw(st.integers(1, 5))):
        qid = f"q{q}"
        subs = draw(st.lists(st.sampled_from(SUBTOPICS), min_size=1, max_size=4, unique=True))
        for s in subs:
            for d in draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=8, unique=True)):
                judgements.append((qid, s, d, draw(st.integers(-1, 2))))
        answer = draw(st.sampled_from(["full", "full", "full", "missing", "empty"]))
        if answer == "missing":
            continue
        ranked = [] if answer == "empty" else draw(st.lists(st.sampled_from(DOCS), max_size=20, unique=True))
        run[qid] = {d: draw(st.integers(0, 12)) / 4.0 for d in ranked}
    return judgements, run


def _measures(level: int, alpha: float, beta: float) -> list[str]:
    rel = f"rel={level}"
    return [
        *(f"alpha_nDCG(alpha={alpha},{rel})@{k}" for k in (1, 2, 5, 10, 20)),
        *(f"ERR_IA({rel})@{k}" for k in (1, 2, 5, 20)),
        f"NRBP(alpha={alpha},beta={beta},{rel})",
        *(f"P_IA({rel})@{k}" for k in (1, 5, 20)),
        *(f"StRecall({rel})@{k}" for k in (1, 5, 20)),
        *(f"nERR_IA({rel})@{k}" for k in (1, 2, 5, 20)),
        *(f"alpha_DCG(alpha={alpha},{rel})@{k}" for k in (1, 2, 5, 20)),
        f"nNRBP(alpha={alpha},beta={beta},{rel})",
        f"AP_IA({rel})",
    ]


def _pyndeval(judgements, run, measure):
    # the subtopic goes in the `iteration` field, which pyndeval reads as the intent
    qrels = [ir_measures.Qrel(q, d, g, s) for q, s, d, g in judgements]
    ranked = Run.from_dict(run)
    ours_order = {q: {d: float(20 - i) for i, d in enumerate(ranked.docs(q))} for q in ranked.query_ids}
    evaluator = ir_measures.providers.registry["pyndeval"].evaluator([ir_measures.parse_measure(measure)], qrels)
    return {m.query_id: float(m.value) for m in evaluator.iter_calc(ours_order)}


def _check(judgements, run, level, alpha, beta):
    names = _measures(level, alpha, beta)
    ev = evaluate(Run.from_dict(run), SubtopicQrels(judgements), names, no_relevant="zero")
    assert len(ev.metrics) == len(names)
    for j, name in enumerate(names):
        ours = dict(zip(ev.query_ids, ev.values[:, j].tolist(), strict=True))
        theirs = _pyndeval(judgements, run, name)
        for qid, value in theirs.items():
            # ndeval divides 0 by 0 for nNRBP of a query with no relevant subtopic; retbench gives such a query
            # 0 on nNRBP, as ndeval does on every other measure
            value = 0.0 if np.isnan(value) and name.startswith("nNRBP") else value
            assert ours[qid] == pytest.approx(value, abs=1e-9), (name, qid)
        assert all(ours[q] == 0.0 for q in set(ours) - set(theirs))  # not answered: 0, as trec_eval -c


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=subtopic_qrels_and_run(),
    level=st.sampled_from([1, 2]),
    alpha=st.sampled_from([0.5, 0.3, 0.9]),
    beta=st.sampled_from([0.5, 0.8]),
)
def test_diversity_measures_match_ndeval(data, level, alpha, beta):
    _check(*data, level, alpha, beta)


def test_diversity_measures_match_ndeval_on_a_scifact_bm25_run(scifact):
    """SciFact has one intent per query; its judged documents get 1-3 of 4 subtopics by doc id, and the
    BM25 run's top-3 unjudged documents are judged non-relevant to subtopic 1."""
    qrels, run = scifact_bm25(scifact)
    judgements = []
    for q, docs in qrels.items():
        for d, g in docs.items():
            n = int(d)
            for s in {n % 4, (n // 4) % 4, (n // 16) % 3}:
                judgements.append((q, str(s + 1), d, g))
        judgements += [(q, "1", d, 0) for d in list(run[q])[:3] if d not in docs]
    _check(judgements, run, 1, 0.5, 0.5)


def test_diversity_measures_ask_for_subtopic_qrels():
    from retbench.data import Qrels

    with pytest.raises(ConfigError, match="alpha_nDCG needs subtopic qrels"):
        evaluate(Run.from_dict({"q": {"a": 1.0}}), Qrels({"q": {"a": 1}}), ["alpha_nDCG@5"])


def test_subtopic_qrels_file_reads_as_ndeval_reads_it_and_other_metrics_see_the_best_grade(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("1 a d1 1\n1 b d1 2\n\n1 b d2 0\n2 a x 1\n")
    sq = read_subtopic_qrels(path)
    assert sq.judgements == [("1", "a", "d1", 1), ("1", "b", "d1", 2), ("1", "b", "d2", 0), ("2", "a", "x", 1)]
    assert sq.to_dict() == {"1": {"d1": 2, "d2": 0}, "2": {"x": 1}}
    ev = evaluate(Run.from_dict({"1": {"d2": 2.0, "d1": 1.0}}), sq, ["ndcg@2", "STREC@2"], no_relevant="zero")
    np.testing.assert_allclose(ev.values, [[1 / np.log2(3), 1.0], [0.0, 0.0]])
    bad = tmp_path / "bad.txt"
    bad.write_text("1 a d1 1\n1 a d1\n")
    with pytest.raises(InputError, match=r"bad.txt:2: expected 4 fields"):
        read_subtopic_qrels(bad)
    bad.write_text("1 a d1 1\n1 a d1 2\n")
    with pytest.raises(InputError, match=r"bad.txt:2: .*judged twice \(first on line 1\)"):
        read_subtopic_qrels(bad)


def test_eval_cli_reads_subtopic_qrels_for_the_diversity_measures_and_qrels_for_the_rest(scifact, tmp_path):
    """`retbench eval QRELS RUN --subtopic-qrels FILE`: the diversity measures equal ndeval's on the queries the
    subtopic qrels judge (the first half of SciFact's test queries here) and do not apply to the others; nDCG
    reads QRELS, so it equals pytrec_eval's on every query."""
    import json

    import pytrec_eval
    from typer.testing import CliRunner

    from retbench.cli import app

    qrels, run = scifact_bm25(scifact)
    qids = list(qrels)
    judged = qids[: len(qids) // 2]
    judgements = [(q, str(int(d) % 3 + 1), d, g) for q in judged for d, g in qrels[q].items()]
    judgements += [(q, "2", d, 0) for q in judged for d in list(run[q])[:2] if d not in qrels[q]]
    (tmp_path / "subtopics.txt").write_text("".join(f"{q} {s} {d} {g}\n" for q, s, d, g in judgements))
    (tmp_path / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    lines = [f"{q} Q0 {d} {r} {s!r} bm25\n" for q, docs in run.items() for r, (d, s) in enumerate(docs.items(), 1)]
    (tmp_path / "run.txt").write_text("".join(lines))
    names = ["alpha_nDCG@10", "ERR_IA@10", "NRBP", "P_IA@5", "STREC@10", "ndcg@10"]
    args = ["eval", str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt"), "--format", "json", "-q"]
    res = CliRunner().invoke(
        app, [*args, *(a for n in names for a in ("-m", n)), "--subtopic-qrels", str(tmp_path / "subtopics.txt")]
    )
    assert res.exit_code == 0, res.output
    rows = {r["query_id"]: r for r in json.loads(res.stdout)["per_query"]}
    assert set(rows) == set(qids)
    for ours, theirs in zip(names[:5], ["alpha_nDCG@10", "ERR_IA@10", "NRBP", "P_IA@5", "StRecall@10"], strict=True):
        reference = _pyndeval(judgements, run, theirs)
        assert set(reference) == set(judged)
        for q in judged:
            assert rows[q][ours] == pytest.approx(reference[q], abs=1e-9), (ours, q)
        assert all(rows[q][ours] is None for q in qids[len(judged) :])  # not judged for subtopics: no value
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    for q in qids:
        assert rows[q]["ndcg@10"] == pytest.approx(trec[q]["ndcg_cut_10"], abs=1e-9)
    no_file = CliRunner().invoke(app, [*args, "-m", "STREC@5", "--subtopic-qrels", str(tmp_path / "missing.txt")])
    assert no_file.exit_code == 2 and "missing.txt" in no_file.output
