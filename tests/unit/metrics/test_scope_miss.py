"""scope_miss_rate over passage judges: gold given as anchors (rel_path + heading-path prefix, optional snippet) or
as character spans is inside a scope when a chunk the judge matches to it is, counted by hand on small cases."""

from __future__ import annotations

import math

import numpy as np

from retbench.chunkers import Chunk, ChunkSet, Span
from retbench.data import Corpus, Run
from retbench.evaluation import evaluate
from retbench.metrics.judges import Anchor, judge_anchors, judge_spans
from retbench.retrievers.scope import ScopeRecord, corpus_views, scope_in_scope

# two documents in two folders; notes/cats.md has two sections
CHUNKS = ChunkSet(
    [
        Chunk("c0", "notes/cats.md", 0, 18, "cats sleep all day", "Cats > Sleep"),
        Chunk("c1", "notes/cats.md", 18, 31, "cats eat fish", "Cats > Food"),
        Chunk("c2", "papers/fusion.md", 0, 22, "reciprocal rank fusion", "Fusion > RRF"),
    ],
    ["notes/cats.md", "papers/fusion.md"],
)
RUN = Run.from_dict({q: {"c0": 3.0, "c1": 2.0, "c2": 1.0} for q in ("a1", "a2", "a3", "a4", "a5")})
NOTES, PAPERS = {"folder": "notes"}, {"folder": "papers"}


def inside(scopes: dict[str, dict | None]):
    """Query id -> "is this chunk inside its scope?", through the scope stage's own records and chunk views."""
    views = corpus_views(CHUNKS.to_corpus())
    return scope_in_scope({q: ScopeRecord(s, 0) for q, s in scopes.items()}, views)


def miss_values(relevance, scopes) -> dict[str, float]:
    ev = evaluate(RUN, relevance, ["scope_miss_rate"], scopes=scopes)
    return dict(zip(ev.query_ids, ev.values[:, 0].tolist(), strict=True))


def test_scope_miss_rate_over_anchors_equals_the_hand_count() -> None:
    gold = {
        "a1": [Anchor("notes/cats.md", "Cats")],  # scope notes: inside
        "a2": [Anchor("papers/fusion.md", "Fusion > RRF")],  # scope notes: miss
        # the snippet narrows the anchor to c1 (Food); the scope holds only the Sleep section: miss
        "a3": [Anchor("notes/cats.md", "Cats", snippet="eat  fish")],
        "a4": [Anchor("papers/fusion.md"), Anchor("notes/cats.md", "Cats > Food")],  # scope papers: one inside
        "a5": [Anchor("papers/fusion.md")],  # the selector chose no scope: everything searched, inside
    }
    scopes = {"a1": NOTES, "a2": NOTES, "a3": {"heading_path": "Cats > Sleep"}, "a4": PAPERS, "a5": None}
    values = miss_values(judge_anchors(RUN, CHUNKS, gold), inside(scopes))
    assert values == {"a1": 0.0, "a2": 1.0, "a3": 1.0, "a4": 0.0, "a5": 0.0}
    rate = evaluate(RUN, judge_anchors(RUN, CHUNKS, gold), ["scope_miss_rate"], scopes=inside(scopes)).means()
    assert rate["scope_miss_rate"] == 2 / 5
    # without snippets a3's anchor is the whole Cats section, and c0 (Sleep) is inside its scope
    no_snippet = miss_values(judge_anchors(RUN, CHUNKS, gold, snippets=False), inside(scopes))
    assert no_snippet["a3"] == 0.0


def test_scope_miss_rate_over_spans_follows_the_overlap_the_span_judge_requires() -> None:
    gold = {
        "a1": [Span("notes/cats.md", 20, 30)],  # in c1, scope notes: inside
        "a2": [Span("notes/cats.md", 2, 8)],  # in c0, scope papers: miss
        "a3": [Span("papers/fusion.md", 0, 10), Span("notes/cats.md", 0, 4)],  # scope papers: one inside
    }
    scopes = inside({"a1": NOTES, "a2": PAPERS, "a3": PAPERS})
    assert miss_values(judge_spans(RUN, CHUNKS, gold), scopes) == {"a1": 0.0, "a2": 1.0, "a3": 0.0}


def test_a_system_without_a_scope_stage_has_no_scope_miss_rate() -> None:
    ev = evaluate(RUN, judge_anchors(RUN, CHUNKS, {"a1": [Anchor("notes/cats.md")]}), ["scope_miss_rate"])
    assert math.isnan(ev.values[0, 0]) and np.isnan(ev.values).all()


def test_a_chunk_is_in_the_folder_of_the_document_it_was_cut_from() -> None:
    documents = Corpus(["d1"], ["text"], None, [{"rel_path": "speeches/sotu.md", "topic": "politics"}])
    chunks = ChunkSet([Chunk("d1#0", "d1", 0, 4, "text")], ["d1"])
    view = corpus_views(chunks.to_corpus(documents=documents))["d1#0"]
    assert (view["folder"], view["rel_path"], view["type"], view["topic"]) == (
        "speeches",
        "speeches/sotu.md",
        "md",
        "politics",
    )
    assert corpus_views(chunks.to_corpus())["d1#0"]["rel_path"] == "d1"  # no document metadata: the document id
