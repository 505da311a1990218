"""Judges on hand-made chunks with worked answers: spans (overlapping chunks), documents, anchors, text, cosine."""

from __future__ import annotations

import numpy as np
import pytest

from retbench.chunkers import Chunk, ChunkSet, Span
from retbench.data import Run
from retbench.evaluation import evaluate
from retbench.metrics import ranking
from retbench.metrics.judges import (
    Anchor,
    budget_cutoffs,
    judge_anchors,
    judge_cosine,
    judge_documents,
    judge_spans,
    judge_text,
    normalize_heading_path,
    overlap_scores,
    pool_documents,
)


def _chunk(cid: str, doc: str, start: int, end: int, tokens: int = 1, path: str = "", text: str | None = None) -> Chunk:
    return Chunk(cid, doc, start, end, text if text is not None else "x" * (end - start), path, tokens)


@pytest.fixture
def spans_case():
    # c0 and c1 overlap each other; both overlap gold excerpt d[8,12)
    chunks = ChunkSet(
        [
            _chunk("c0", "d", 0, 10, 4),
            _chunk("c1", "d", 5, 15, 4),
            _chunk("c2", "d", 20, 30, 6),
            _chunk("c3", "d", 40, 60, 10),
            _chunk("c4", "e", 0, 10, 3),
        ],
        ["d", "e"],
    )
    gold = {"q1": [Span("d", 8, 12), Span("d", 45, 50)], "q2": [Span("e", 0, 5), Span("d", 90, 95)]}
    run = Run.from_dict({"q1": {"c2": 5, "c0": 4, "c1": 3, "c3": 2}, "q2": {"c4": 1, "c0": 0.5}})
    return chunks, gold, run


def test_span_judge_gains_recall_over_excerpts_and_mrr(spans_case):
    chunks, gold, run = spans_case
    j = judge_spans(run, chunks, gold)
    assert j.query_ids == ["q1", "q2"]
    np.testing.assert_array_equal(j.gains.gains, [[0, 1, 1, 1], [1, 0, 0, 0]])
    # relevant chunks of the collection: c0, c1, c3 for q1; only c4 for q2 (no chunk covers d[90,95))
    assert j.gains.n_relevant().tolist() == [3, 1]
    assert j.n_items.tolist() == [2, 2]
    np.testing.assert_allclose(j.recall(1), [0.0, 0.5])
    np.testing.assert_allclose(j.recall(3), [0.5, 0.5])
    np.testing.assert_allclose(j.recall(4), [1.0, 0.5])
    np.testing.assert_allclose(j.mrr(), [0.5, 1.0])
    np.testing.assert_allclose(j.precision(2), [0.5, 0.5])
    np.testing.assert_allclose(j.recall_any(1), [0.0, 1.0])
    np.testing.assert_allclose(j.recall_all(4), [1.0, 0.0])
    # chunk-level recall calls q2 perfect although half its gold text is in no chunk: excerpt recall does not
    np.testing.assert_allclose(ranking.recall(j.gains, np.array([4, 4])), [1.0, 1.0])


def test_every_registry_metric_over_span_relevance(spans_case):
    chunks, gold, run = spans_case
    j = judge_spans(run, chunks, gold)
    ev = evaluate(run, j, ["recall@4", "mrr", "P@2", "hit@1", "recall_all@4", "ndcg@4"], system="s")
    assert ev.query_ids == ["q1", "q2"] and ev.status == ["ok", "ok"]
    np.testing.assert_allclose(ev.column("recall@4"), [1.0, 0.5])  # excerpts, not chunks
    np.testing.assert_allclose(ev.column("mrr"), [0.5, 1.0])
    np.testing.assert_allclose(ev.column("P@2"), [0.5, 0.5])
    np.testing.assert_allclose(ev.column("hit@1"), [0.0, 1.0])
    np.testing.assert_allclose(ev.column("recall_all@4"), [1.0, 0.0])
    # q1: gains 0,1,1,1 against an ideal of 3 relevant chunks
    dcg = 1 / np.log2(3) + 1 / np.log2(4) + 1 / np.log2(5)
    np.testing.assert_allclose(ev.column("ndcg@4"), [dcg / (1 + 1 / np.log2(3) + 1 / np.log2(4)), 1.0])
    # a query the system never answered counts as 0; a query without gold is skipped
    more = {**gold, "q3": [Span("d", 0, 3)], "q4": []}
    ev2 = evaluate(run, judge_spans(run, chunks, more), ["recall@4"])
    assert ev2.query_ids == ["q1", "q2", "q3"] and ev2.status[2] == "missing" and ev2.column("recall@4")[2] == 0.0
    assert ev2.skipped == ["q4"]


def test_span_judge_minimum_overlap_in_chars_and_fraction(spans_case):
    chunks, gold, run = spans_case
    # c0 shares 2 chars with d[8,12), c1 shares 4, c3 shares all 5 of d[45,50)
    np.testing.assert_array_equal(judge_spans(run, chunks, gold, min_chars=3).gains.gains[0], [0, 0, 1, 1])
    np.testing.assert_array_equal(judge_spans(run, chunks, gold, min_fraction=0.9).gains.gains[0], [0, 0, 1, 1])
    np.testing.assert_array_equal(judge_spans(run, chunks, gold, min_chars=6).gains.gains[0], [0, 0, 0, 0])


def test_character_precision_recall_iou_count_overlapping_chunks_once(spans_case):
    chunks, gold, run = spans_case
    s = overlap_scores(run, chunks, gold, k=3)
    # q1 top 3: [20,30) ∪ [0,10) ∪ [5,15) = 25 chars; gold 4 + 5 = 9; overlap [8,12) = 4; union 30
    # q2 top 2: e[0,10) + d[0,10) = 20; gold e[0,5) + d[90,95) = 10; overlap 5; union 25
    assert s["retrieved_chars"].tolist() == [25, 20]
    assert s["gold_chars"].tolist() == [9, 10]
    assert s["overlap_chars"].tolist() == [4, 5]
    np.testing.assert_allclose(s["precision"], [4 / 25, 5 / 20])
    np.testing.assert_allclose(s["recall"], [4 / 9, 0.5])
    np.testing.assert_allclose(s["iou"], [4 / 30, 5 / 25])
    # per-query cutoffs: nothing retrieved scores 0
    s0 = overlap_scores(run, chunks, gold, k=np.array([0, 1]))
    assert s0["precision"].tolist()[0] == 0.0 and s0["iou"][1] == pytest.approx(1 / 3)


def test_budget_cutoffs_take_a_strict_prefix(spans_case):
    chunks, _, run = spans_case
    # q1 tokens in rank order 6, 4, 4, 10; q2: 3, 4
    assert budget_cutoffs(run, chunks, ["q1", "q2"], 14).tolist() == [3, 2]
    assert budget_cutoffs(run, chunks, ["q1", "q2"], 5).tolist() == [0, 1]
    assert budget_cutoffs(run, chunks, ["q2", "missing"], 100).tolist() == [2, 0]


def test_document_level_max_pooling_first_occurrence(spans_case):
    chunks, _, run = spans_case
    docs = pool_documents(run, chunks)
    assert docs.ranking("q1") == [("d", 5.0)]
    assert docs.ranking("q2") == [("e", 1.0), ("d", 0.5)]
    gm = judge_documents(run, chunks, {"q2": {"d": 1}})
    np.testing.assert_allclose(ranking.reciprocal_rank(gm, None), [0.5])


def test_unknown_chunk_in_run_is_an_error(spans_case):
    chunks, gold, _ = spans_case
    with pytest.raises(ValueError, match="'zz'"):
        judge_spans(Run.from_dict({"q1": {"zz": 1}}), chunks, gold)


@pytest.mark.parametrize(
    ("raw", "parts"),
    [
        ("Intro > Setup", ("Intro", "Setup")),
        ("  Intro>Setup ", ("Intro", "Setup")),
        ("## Intro ›  Set   up", ("Intro", "Set up")),
        ("", ()),
    ],
)
def test_heading_path_normalization(raw, parts):
    assert normalize_heading_path(raw) == parts


def test_anchor_judge_prefix_rel_path_snippet_and_groups():
    chunks = ChunkSet(
        [
            _chunk("a0", "guide.md", 0, 5, path="Intro"),
            _chunk("a1", "guide.md", 5, 9, path="Intro > Setup > Linux", text="run pip install x"),
            _chunk("a2", "guide.md", 9, 20, path="Intro > Setupx"),
            _chunk("a3", "other.md", 0, 5, path="Intro > Setup", text="pip install"),
            _chunk("a4", "guide.md", 20, 30, path="Intro > Usage"),
        ],
        ["guide.md", "other.md"],
    )
    run = Run.from_dict({"q": {"a2": 5, "a3": 4, "a1": 3, "a0": 2, "a4": 1}})
    setup, usage = Anchor("guide.md", " Intro›Setup "), Anchor("guide.md", "Intro > Usage")
    j = judge_anchors(run, chunks, {"q": [setup, usage]}, groups={"q": [[0], [1]]})
    # Setupx is not a prefix match; other.md has the wrong rel_path; Linux is under Setup
    np.testing.assert_array_equal(j.gains.gains[0], [0, 0, 1, 0, 1])
    assert j.recall_any(3)[0] == 1.0 and j.recall_all(3)[0] == 0.0 and j.recall_all(5)[0] == 1.0
    assert j.mrr()[0] == pytest.approx(1 / 3)
    # a gold support at a shallower depth matches every chunk below it
    jd = judge_anchors(run, chunks, {"q": [Anchor("guide.md", "Intro")]})
    np.testing.assert_array_equal(jd.gains.gains[0], [1, 0, 1, 1, 1])
    assert jd.gains.n_relevant().tolist() == [4] and j.gains.n_relevant().tolist() == [2]
    # snippet containment (whitespace collapsed) is required when given, unless switched off
    snip = Anchor("guide.md", "Intro > Setup", snippet="pip   install")
    assert judge_anchors(run, chunks, {"q": [snip]}).gains.gains[0].tolist() == [0, 0, 1, 0, 0]
    wrong = Anchor("guide.md", "Intro", snippet="absent")
    assert judge_anchors(run, chunks, {"q": [wrong]}).gains.gains[0].sum() == 0
    assert judge_anchors(run, chunks, {"q": [wrong]}, snippets=False).gains.gains[0].sum() == 4


def test_groups_with_alternatives_and_bad_group_index():
    chunks = ChunkSet([_chunk("a", "d", 0, 5), _chunk("b", "d", 10, 15)], ["d"])
    run = Run.from_dict({"q": {"a": 2, "b": 1}})
    gold = {"q": [Span("d", 0, 2), Span("d", 50, 60), Span("d", 11, 12)]}
    # group 0: excerpt 0 or 1 (alternatives); group 1: excerpt 2
    j = judge_spans(run, chunks, gold, groups={"q": [[0, 1], [2]]})
    assert j.recall_all(1)[0] == 0.0 and j.recall_all(2)[0] == 1.0
    assert j.recall(2)[0] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="item 5"):
        judge_spans(run, chunks, gold, groups={"q": [[5]]})


def test_exact_text_judge():
    texts = {"c1": " alpha beta\n", "c2": "alpha  beta", "c3": "gamma"}
    run = Run.from_dict({"q": {"c1": 3, "c2": 2, "c3": 1}})
    j = judge_text(run, texts, {"q": ["alpha beta"]})
    np.testing.assert_array_equal(j.gains.gains[0], [1, 0, 0])
    j2 = judge_text(run, texts, {"q": ["alpha beta", "delta"]}, collapse_whitespace=True)
    np.testing.assert_array_equal(j2.gains.gains[0], [1, 1, 0])
    np.testing.assert_allclose([j2.precision(3)[0], j2.recall(3)[0]], [2 / 3, 0.5])
    assert j2.gains.n_relevant().tolist() == [2]  # two texts of the collection equal a gold text
    np.testing.assert_allclose(j2.f1(3)[0], 2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))


def test_cosine_threshold_judge_precision_recall_f1():
    ids = ["x", "y", "z"]
    mat = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 3.0]])  # cos(y, e1) = 0.8 exactly; z unnormalized
    run = Run.from_dict({"q": {"y": 3, "z": 2, "x": 1}})
    j = judge_cosine(run, (ids, mat), {"q": np.array([[2.0, 0.0]])})
    np.testing.assert_array_equal(j.gains.gains[0], [1, 0, 1])
    np.testing.assert_allclose([j.precision(2)[0], j.recall(2)[0], j.f1(2)[0]], [0.5, 1.0, 2 / 3])
    assert j.gains.n_relevant().tolist() == [2]
    strict = judge_cosine(run, (ids, mat), {"q": np.array([[1.0, 0.0]])}, threshold=0.9)
    np.testing.assert_array_equal(strict.gains.gains[0], [0, 0, 1])
    assert strict.recall(2)[0] == 0.0 and strict.recall(3)[0] == 1.0
    two = judge_cosine(run, (ids, mat), {"q": np.array([[1.0, 0.0], [0.0, 1.0]])})
    np.testing.assert_allclose(two.recall(1), [0.5])  # y matches e1 only
    np.testing.assert_allclose(two.recall(2), [1.0])
    with pytest.raises(ValueError, match="no embedding"):
        judge_cosine(Run.from_dict({"q": {"w": 1}}), (ids, mat), {"q": np.eye(2)})


def test_query_absent_from_run_scores_zero(spans_case):
    chunks, gold, run = spans_case
    j = judge_spans(run, chunks, {**gold, "q3": [Span("d", 0, 1)]})
    assert j.gains.lengths.tolist() == [4, 2, 0]
    assert j.recall(10)[2] == 0.0 and j.mrr()[2] == 0.0


def test_span_relevance_follows_the_same_counting_settings_as_qrels(spans_case):
    from retbench.errors import ConfigError
    from retbench.metrics.settings import EvalSettings

    chunks, gold, run = spans_case
    judgement = judge_spans(run, chunks, {**gold, "q3": [Span("d", 0, 3)], "q4": []})
    answered_only = evaluate(run, judgement, ["recall@4"], EvalSettings(mode="pytrec_eval"))
    assert answered_only.query_ids == ["q1", "q2"] and answered_only.excluded == ["q3", "q4"]  # unanswered
    zero = evaluate(run, judgement, ["recall@4", "mrr"], no_relevant="zero")
    assert zero.query_ids == ["q1", "q2", "q3", "q4"] and zero.skipped == []
    np.testing.assert_allclose(zero.values[3], [0.0, 0.0])  # no gold item: nothing to find, scored 0
    one = evaluate(run, judgement, ["recall@4"], no_relevant="one")
    assert one.column("recall@4").tolist()[2:] == [0.0, 0.0]  # unanswered: 0 even without gold (missing is not good)
    with pytest.raises(ConfigError, match="relevance level must be 1"):
        evaluate(run, judgement, ["recall@4"], relevance_level=2)
