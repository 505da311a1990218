"""Which words of a document the labelling page marks: the query's terms by their BM25 stems, stopwords aside."""

from __future__ import annotations

from retbench.studies.labels.highlight import Highlighter


def test_query_terms_leave_out_stopwords_and_single_letters():
    assert Highlighter().terms("Which of the T cells fight a virus?") == ["which", "cells", "fight", "virus"]


def test_words_that_stem_like_a_query_term_are_marked_and_the_segments_rejoin_to_the_text():
    h = Highlighter()
    text = 'A <b>cell</b> & "Viruses"; the cellular wall.'
    segments = h.segments(text, h.terms("cells and the virus"))
    assert "".join(s["text"] for s in segments) == text
    assert [s["text"] for s in segments if s["mark"]] == ["cell", "Viruses"]  # "cellular" stems otherwise
    assert not any(s["mark"] and s["text"].lower() == "the" for s in segments)


def test_a_document_without_query_terms_is_one_unmarked_segment():
    h = Highlighter()
    assert h.segments("nothing here", h.terms("quantum")) == [{"text": "nothing here", "mark": False}]
    assert h.segments("", ["x"]) == [{"text": "", "mark": False}]
