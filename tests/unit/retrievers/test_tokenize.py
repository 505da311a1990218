"""The shared BM25 tokenizer: its fast split gives the regex's tokens, ids and order on any text.

The reference is the recipe written out plainly here (lowercase, `re.findall` of the token pattern per
text, stopwords dropped, then PyStemmer per token; new stems numbered in sorted order per call), so
the tokenizer's translate-and-split path is checked against the regex itself, not against its own output.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
import Stemmer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retbench.retrievers.postings import Postings
from retbench.retrievers.tokenize import DEFAULT_PATTERN, Tokenizer

STOP = ["the", "of", "and", "qq", "über"]
# ASCII word and non-word characters, the break word's letter in both cases, Unicode letters and digits
# (é, ß, İ whose lowercase is two characters, Σ with its final form, ǅ, ², Arabic-Indic 3, CJK), characters
# that are not word characters (dashes, degree, NBSP, NEL, zero-width space, a combining accent) and a
# lone surrogate, which UTF-8 cannot encode without help.
# Beyond the BMP: a letter (U+1D400), an emoji, and the two halves of U+1D400's surrogate pair, which
# must stay two non-word characters and never be joined into the letter on the way through UTF-8.
ALPHABET = list("abzAQq09_ -.,'\t\n\x0b\x1c\x00") + list(
    "éßİΣσǅ²٣中文–°\xa0\x85\u200b\u0301\ud800\U0001d400\U0001f600\ud835\udc00"
)
texts_st = st.lists(st.text(alphabet=ALPHABET, max_size=40), max_size=8)


def reference(texts: list[str], *, lower: bool = True, stem: bool = False) -> list[list[str]]:
    stemmer = Stemmer.Stemmer("english") if stem else None
    out = []
    for text in texts:
        words = [w for w in re.findall(DEFAULT_PATTERN, text.lower() if lower else text) if w not in STOP]
        out.append([stemmer.stemWord(w) for w in words] if stemmer else words)
    return out


def reference_ids(batches: list[list[list[str]]], vocab: dict[str, int]) -> list[list[list[int]]]:
    """New stems of each call numbered after the old ones, in sorted order; ids per text in text order."""
    out = []
    for tokens in batches:
        for stem in sorted({t for toks in tokens for t in toks} - vocab.keys()):
            vocab[stem] = len(vocab)
        out.append([[vocab[t] for t in toks] for toks in tokens])
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=texts_st, lower=st.booleans(), stem=st.booleans())
def test_tokens_equal_the_regex_recipe_on_any_text(texts, lower, stem):
    tok = Tokenizer(STOP, "english" if stem else None, lower=lower)
    assert tok.tokenize(texts) == reference(texts, lower=lower, stem=stem)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=texts_st, second=texts_st, queries=texts_st)
def test_token_ids_grow_in_sorted_order_per_call_and_queries_drop_unknown_terms(first, second, queries):
    tok, vocab = Tokenizer(STOP, None), {}
    got = [tok.tokenize_ids(first, vocab, grow=True), tok.tokenize_ids(second, vocab, grow=True)]
    want_vocab: dict[str, int] = {}
    assert got == reference_ids([reference(first), reference(second)], want_vocab)
    assert vocab == want_vocab
    assert tok.tokenize_ids(queries, vocab, grow=False) == [
        [vocab[t] for t in toks if t in vocab] for toks in reference(queries)
    ]
    assert vocab == want_vocab  # queries add nothing


def test_a_piece_with_several_tokens_keeps_their_order_among_the_others():
    # "gamma–alpha" is one piece of the fast split (the dash is not ASCII) holding two tokens; "beta–x°y" one
    tok, vocab = Tokenizer(None, None), {}
    tok.tokenize_ids(["alpha beta gamma delta"], vocab, grow=True)
    query = "delta gamma–alpha beta–x°y gamma"
    assert tok.tokenize_ids([query], vocab, grow=False) == [
        [vocab[t] for t in ["delta", "gamma", "alpha", "beta", "gamma"]]
    ]
    owner, ids = tok.token_array(["", query, "beta"], vocab, grow=False)
    assert owner.tolist() == [1, 1, 1, 1, 1, 2] and ids.dtype == owner.dtype == np.int64


@pytest.mark.parametrize(
    ("texts", "want"),
    [
        ([], []),
        (["", "   ", "the of and"], [[], [], []]),  # empty, blank, stopwords only
        (["a b c 1 _"], [[]]),  # single characters only
        (["QQ qq Qq"], [["qq", "qq", "qq"]]),  # the break word itself, any case: lowercased, a token
    ],
)
def test_texts_without_tokens_and_the_break_word(texts, want):
    assert Tokenizer(["the", "of", "and"], None).tokenize(texts) == want


def test_the_break_word_in_text_that_is_not_lowercased_is_a_token_like_any_other():
    tok = Tokenizer(None, None, lower=False)
    assert tok.tokenize(["x QQ y", "QQQ", "Ab"]) == [["QQ"], ["QQQ"], ["Ab"]]


def test_another_token_pattern_is_used_as_given():
    tok = Tokenizer(None, None, token_pattern=r"[a-z]+")
    assert tok.tokenize(["ab_c d-é1x"]) == [["ab", "c", "d", "x"]]


def test_term_counts_from_pairs_in_any_order_equal_those_from_token_lists():
    rng = random.Random(7)
    lists = [[rng.randrange(20) for _ in range(rng.randrange(12))] for _ in range(30)]
    owner = np.repeat(np.arange(len(lists)), [len(t) for t in lists])
    term = np.asarray([t for toks in lists for t in toks], dtype=np.int64)
    shuffle = np.asarray(rng.sample(range(len(term)), len(term)), dtype=np.int64)
    a = Postings.from_token_lists(lists, first_doc=5)
    b = Postings.from_pairs(owner[shuffle], term[shuffle], len(lists), first_doc=5)
    for field in ("doc", "term", "count", "lengths"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        assert getattr(a, field).dtype == getattr(b, field).dtype
    assert a.lengths.tolist() == [len(t) for t in lists] and a.doc.min() == 5


def _every_character_in_word_positions() -> list[str]:
    """Each character below U+3000 (ASCII, Latin, Greek, Cyrillic, combining marks, general punctuation,
    zero-width characters, letterlike symbols, number forms) and a sample of the rest, including letters
    outside the BMP that have a lowercase (Deseret, Adlam), inside a word, doubled, and at a word's edges."""
    sample = [*range(0x3000), *range(0x3000, 0x110000, 97), 0x1D400, 0x10400, 0x1E900, 0x20000, 0xE0041, 0x10FFFF]
    texts = [form.format(c=chr(cp)) for cp in sample for form in ("a{c}b", "{c}{c}", "1{c}_ {c}é")]
    return [t for t in texts if "QQ" not in t]  # the break word would send the whole batch to the regex path


@pytest.mark.parametrize("lower", [True, False])
def test_every_character_below_u3000_and_a_sample_of_the_rest_splits_as_the_regex_does(lower):
    texts = _every_character_in_word_positions()
    tok = Tokenizer(None, None, lower=lower)
    assert tok._pieces(texts).owner is None  # the fast split itself is what is checked here
    assert tok.tokenize(texts) == [re.findall(DEFAULT_PATTERN, t.lower() if lower else t) for t in texts]


@pytest.mark.parametrize(
    "texts",
    [
        ["Q", "Q"],  # neighbouring texts never join into the break word
        ["aQ", "Qb", "Q", "", "Q"],
        ["QQ", "x"],  # a text holding it (regex path) ...
        ["QQ\u00e9", "\u00e9QQ"],  # ... also glued to letters that are not ASCII
        ["ab\ud835\udc00cd", "\ud835\udc00\ud835\udc01"],  # a surrogate pair's halves are two non-word characters
    ],
)
def test_texts_that_are_not_lowercased_split_as_the_regex_does_around_the_break_word(texts):
    assert Tokenizer(None, None, lower=False).tokenize(texts) == reference(texts, lower=False)


def test_a_fresh_tokenizer_continues_an_existing_vocabulary_with_the_ids_the_first_would_give():
    # a loaded index: the vocabulary is full but the new tokenizer's stem memo is empty
    first = ["Running cells, naïve β-cell assays", "The QQ of über-cells"]
    second = ["cells run naïvely", "new–words and ünïcode", "QQ qq"]
    a, vocab = Tokenizer(STOP, "english"), {}
    a.tokenize_ids(first, vocab, grow=True)
    saved = dict(vocab)
    want = a.tokenize_ids(second, vocab, grow=True)
    assert Tokenizer(STOP, "english").tokenize_ids(second, saved, grow=True) == want
    assert list(saved.items()) == list(vocab.items())
    assert want == reference_ids([reference(second, stem=True)], _vocab_of(first))[0]


def _vocab_of(texts: list[str]) -> dict[str, int]:
    vocab: dict[str, int] = {}
    reference_ids([reference(texts, stem=True)], vocab)
    return vocab


def test_texts_given_as_a_generator_or_a_tuple_tokenize_as_a_list_does():
    texts = ["The cats", "", "dogs–über ran"]
    want = reference(texts, stem=True)
    assert Tokenizer(STOP, "english").tokenize(t for t in texts) == want
    assert Tokenizer(STOP, "english").tokenize(tuple(texts)) == want
    vocab: dict[str, int] = {}
    assert Tokenizer(STOP, "english").tokenize_ids(iter(texts), vocab, grow=True) == reference_ids([want], {})[0]


def test_stopwords_given_as_a_generator_are_dropped_and_recorded_as_given():
    tok = Tokenizer((w for w in ["The", "cats"]), None)  # read once, lowercased for matching
    assert tok.tokenize(["the cats sat"]) == [["sat"]]
    assert tok.describe()["stopwords"] == ["The", "cats"]
