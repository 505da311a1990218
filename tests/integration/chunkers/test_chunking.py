"""Chunkers: worked examples per chunker, and the exact-offset property for all of them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retbench.chunkers import (
    ChunkSet,
    FixedChars,
    FixedTokens,
    HFTokenizer,
    MarkdownHeadings,
    Recursive,
    RegexTokenizer,
    SentenceWindow,
    Span,
    make_chunker,
)
from retbench.data import Corpus
from retbench.errors import ConfigError


def texts(chunks):
    return [c.text for c in chunks]


def test_fixed_chars_windows_with_overlap():
    chunks = FixedChars(size=4, overlap=1).chunk("d", "abcdefghij")
    assert [(c.start, c.end) for c in chunks] == [(0, 4), (3, 7), (6, 10)]
    assert texts(chunks) == ["abcd", "defg", "ghij"]
    assert [c.id for c in chunks] == ["d#0", "d#1", "d#2"]


def test_fixed_chars_trims_whitespace_and_drops_blank_windows():
    chunks = FixedChars(size=4).chunk("d", "ab      cd")
    assert [(c.start, c.end, c.text) for c in chunks] == [(0, 2, "ab"), (8, 10, "cd")]


def test_fixed_tokens_counts_tokens_not_characters():
    chunks = FixedTokens(size=3, overlap=1, tokenizer=RegexTokenizer()).chunk("d", "alpha b c dd e")
    assert texts(chunks) == ["alpha b c", "c dd e"]
    assert [c.n_tokens for c in chunks] == [3, 3]


def test_fixed_tokens_with_the_model_tokenizer_keeps_offsets_exact():
    text = "Senjō no Valkyria 3 (戦場のヴァルキュリア3) is a tactical role-playing game."
    chunks = FixedTokens(size=8, overlap=2, tokenizer="all-MiniLM-L6-v2").chunk("d", text)
    assert len(chunks) > 2
    assert all(text[c.start : c.end] == c.text for c in chunks)
    assert all(c.n_tokens <= 8 for c in chunks)
    # windows advance by size - overlap = 6 tokens: consecutive chunks share their 2 boundary tokens
    assert chunks[1].start < chunks[0].end


def test_sentence_windows():
    chunks = SentenceWindow(size=2, overlap=1).chunk("d", "One. Two! Three? Four.")
    assert texts(chunks) == ["One. Two!", "Two! Three?", "Three? Four."]


def test_recursive_prefers_paragraphs_then_words():
    text = "Para one is here.\n\nPara two is a bit longer than twenty."
    chunks = Recursive(size=20, overlap=0).chunk("d", text)
    assert texts(chunks) == ["Para one is here.", "Para two is a bit", "longer than twenty."]


def test_recursive_merges_small_paragraphs_up_to_size():
    text = "aa\n\nbb\n\ncc\n\ndd"
    assert texts(Recursive(size=6).chunk("d", text)) == ["aa\n\nbb", "cc\n\ndd"]
    # overlap repeats the last piece that fits in it
    assert texts(Recursive(size=6, overlap=4).chunk("d", text)) == ["aa\n\nbb", "bb\n\ncc", "cc\n\ndd"]


def test_markdown_heading_paths_and_bare_headings():
    text = (
        "Preface.\n# Intro\nHello.\n## Setup\nInstall it.\n### Linux\n\n## Usage\nRun it.\n"
        "# Next\n```\n# not a heading\n```\nend"
    )
    chunks = MarkdownHeadings(max_size=200).chunk("d", text)
    got = [(c.heading_path, c.text) for c in chunks]
    assert got == [
        ("", "Preface."),
        ("Intro", "# Intro\nHello."),
        ("Intro > Setup", "## Setup\nInstall it."),
        # '### Linux' has no text of its own: it joins the next section, whose path wins
        ("Intro > Usage", "### Linux\n\n## Usage\nRun it."),
        ("Next", "# Next\n```\n# not a heading\n```\nend"),
    ]


def test_markdown_wikitext_headings_and_oversized_sections_keep_their_path():
    text = " = Game = \n Intro text .\n = = Plot = = \n " + "word " * 30 + "\n = = = Cast = = = \n Names .\n"
    chunks = MarkdownHeadings(max_size=60).chunk("d", text)
    paths = [c.heading_path for c in chunks]
    assert paths[0] == "Game"
    assert paths[-1] == "Game > Plot > Cast"
    plot = [c for c in chunks if c.heading_path == "Game > Plot"]
    assert len(plot) >= 3 and all(len(c.text) <= 60 for c in plot)


def test_chunkset_maps_chunks_to_documents_and_spans():
    corpus = Corpus(["a", "b", "empty"], ["abcdefghij", "klmnop", "   "], join_rule="text_only")
    cs = FixedChars(size=4).chunk_corpus(corpus)
    assert cs.ids == ["a#0", "a#1", "a#2", "b#0", "b#1"]
    assert cs.overlapping(Span("a", 3, 5)) == ["a#0", "a#1"]
    assert cs.overlapping(Span("a", 3, 5), min_overlap=2) == []
    assert cs.overlapping(Span("b", 0, 6)) == ["b#0", "b#1"]
    assert cs.docs_without_chunks() == ["empty"]
    assert cs.positions(["b#1", "zz"]).tolist() == [4, -1]
    chunk_corpus = cs.to_corpus()
    assert chunk_corpus.joined(3) == "klmn" and chunk_corpus.metadata[3]["doc_id"] == "b"
    stats = cs.stats(max_tokens=0)
    assert stats["n_chunks"] == 5 and stats["docs_without_chunks"] == 1
    assert stats["tokens_max"] == 1 and stats["chunks_over_max"] == 5


def test_stats_percentiles_of_tokens_per_chunk():
    text = " ".join(["w"] * 10)
    cs = ChunkSet(FixedTokens(size=4, tokenizer=RegexTokenizer()).chunk("d", text), ["d"])
    assert cs.n_tokens.tolist() == [4, 4, 2]
    s = cs.stats(max_tokens=3)
    assert (s["tokens_min"], s["tokens_max"], s["chunks_over_max"]) == (2, 4, 2)
    assert s["tokens_mean"] == pytest.approx(10 / 3)


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "fixed_chars", "size": 10, "overlap": 10},
        {"kind": "sentences", "size": 0},
        {"kind": "nope"},
        {"kind": "recursive", "separators": ["paragraph", "clause"]},
        {"kind": "recursive", "unit": "bytes"},
        {"kind": "fixed_chars", "chunk_size": 3},
    ],
)
def test_bad_chunker_configs_are_config_errors(spec):
    with pytest.raises(ConfigError):
        make_chunker(spec)


# -- property: every chunker slices the document exactly -------------------------------------------
ALPHABET = "ab é戦.!? \n\t#=`"
CHUNKERS = [
    FixedChars(size=7, overlap=2),
    FixedTokens(size=3, overlap=1, tokenizer=RegexTokenizer()),
    SentenceWindow(size=2, overlap=1),
    Recursive(size=9, overlap=3),
    Recursive(size=4, overlap=1, unit="tokens", tokenizer=RegexTokenizer()),
    MarkdownHeadings(max_size=12, overlap=2),
]


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=80))
def test_every_chunk_is_an_exact_trimmed_slice_and_all_text_is_covered(text):
    for chunker in CHUNKERS:
        chunks = chunker.chunk("doc", text)
        covered = np.zeros(len(text), dtype=bool)
        for c in chunks:
            assert text[c.start : c.end] == c.text, chunker.kind
            assert c.text and not c.text[0].isspace() and not c.text[-1].isspace()
            covered[c.start : c.end] = True
        assert [c.start for c in chunks] == sorted(c.start for c in chunks)
        visible = np.array([not ch.isspace() for ch in text], dtype=bool)
        assert not (visible & ~covered).any(), f"{chunker.kind} lost text"
        if chunker.unit == "tokens":
            size = getattr(chunker, "size", None) or chunker.max_size
            assert all(c.n_tokens <= size for c in chunks), chunker.kind
        elif chunker.kind != "sentences":
            size = getattr(chunker, "max_size", None) or chunker.size
            assert all(len(c.text) <= size for c in chunks), chunker.kind


def test_hf_tokenizer_offsets_are_character_offsets():
    tok = HFTokenizer("all-MiniLM-L6-v2")
    text = "戦場 Valkyria"
    off = tok.offsets(text)
    pieces = [text[a:b] for a, b in off]
    assert pieces[:2] == ["戦", "場"]
    assert "".join(pieces[2:]) == "Valkyria" and off[-1, 1] == len(text)
