"""BM25 adapters: the shared tokenizer, parity with the raw libraries, worked scores, add/delete/save."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from retbench.data import Corpus, Queries, QueryStatus
from retbench.errors import ConfigError, InputError
from retbench.retrievers import create
from retbench.retrievers.base import Retriever
from retbench.retrievers.bm25 import BM25SRetriever, RankBM25Retriever
from retbench.retrievers.tokenize import Tokenizer


@pytest.fixture(scope="module")
def slice_(scifact):
    """300 SciFact documents and the test queries whose relevant docs are among them."""
    corpus = scifact.corpus.subset(scifact.corpus.ids[:300])
    qrels = scifact.split("test")
    qids = [q for q in qrels if set(qrels[q]) & set(corpus.ids)]
    return corpus, scifact.queries.subset(qids)


def toy() -> Corpus:
    return Corpus(["d1", "d2", "d3"], ["cat cat dog", "dog bird", "fish"])


# -- tokenizer ---------------------------------------------------------------------------------
def test_tokenizer_drops_stopwords_before_stemming_and_single_chars():
    tok = Tokenizer()
    assert tok.tokenize(["The Running dogs ran to the cats!", "a I x", ""]) == [["run", "dog", "ran", "cat"], [], []]
    assert Tokenizer(stopwords=None, stemmer=None).tokenize(["The Running dogs"]) == [["the", "running", "dogs"]]


def test_tokenizer_matches_bm25s_recipe_on_scifact(slice_):
    import bm25s
    import Stemmer

    texts = slice_[0].joined_texts()
    theirs = bm25s.tokenize(
        texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False, show_progress=False
    )
    assert Tokenizer("en", "english").tokenize(texts) == theirs


def test_tokenizer_matches_bm25s_on_text_that_is_not_plain_ascii():
    import bm25s
    import Stemmer

    texts = [
        "Naïve Bayes–based β-cell assays at 10°C (n=3)",  # pieces of the fast split holding several tokens
        "",
        "The of and",  # stopwords only
        "ΣΟΦΙΑ σοφίας İstanbul straße STRASSE",
        "x\ud800y ab\u200bcd e\u0301f nbsp\xa0here",  # lone surrogate, zero-width space, combining accent
        "中文 文本 ab² snake_case__x QQ qq",
    ]
    theirs = bm25s.tokenize(
        texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False, show_progress=False
    )
    assert Tokenizer("en", "english").tokenize(texts) == theirs


def test_tokenizer_rejects_unknown_settings():
    with pytest.raises(ValueError, match="stemmer"):
        Tokenizer(stemmer="klingon")
    with pytest.raises(ValueError, match="stopword"):
        Tokenizer(stopwords="klingon")


# -- scores ------------------------------------------------------------------------------------
def test_bm25s_lucene_scores_match_worked_example():
    # N=3, avgdl=2; idf(t) = ln(1 + (N - df + .5)/(df + .5)); tf part = tf / (tf + k1 (1 - b + b dl/avgdl))
    r = BM25SRetriever(stopwords=None, stemmer=None)
    r.index(toy())
    [ranking] = r.search_batch(["cat dog"], 3)
    idf_cat, idf_dog = math.log(1 + 2.5 / 1.5), math.log(1 + 1.5 / 2.5)
    d1 = idf_cat * 2 / (2 + 1.5 * (0.25 + 0.75 * 1.5)) + idf_dog * 1 / (1 + 1.5 * (0.25 + 0.75 * 1.5))
    d2 = idf_dog * 1 / (1 + 1.5 * (0.25 + 0.75 * 1.0))
    assert [d for d, _ in ranking] == ["d1", "d2"]  # d3 scores 0: padding, dropped
    assert ranking[0][1] == pytest.approx(d1, rel=1e-6) == pytest.approx(0.6363403589, rel=1e-6)
    assert ranking[1][1] == pytest.approx(d2, rel=1e-6) == pytest.approx(0.1880014517, rel=1e-6)
    assert all(type(d) is str and type(s) is float for d, s in ranking)


def test_bm25s_adapter_equals_raw_bm25s(slice_):
    import bm25s
    import Stemmer

    corpus, queries = slice_
    stem = Stemmer.Stemmer("english")
    raw = bm25s.BM25(k1=1.5, b=0.75)
    raw.index(
        bm25s.tokenize(corpus.joined_texts(), stopwords="en", stemmer=stem, show_progress=False), show_progress=False
    )
    qtok = bm25s.tokenize(list(queries.values()), stopwords="en", stemmer=stem, return_ids=False, show_progress=False)
    docs, scores = raw.retrieve(qtok, k=10, show_progress=False)

    ours = create("bm25s", {"k1": 1.5, "b": 0.75})
    ours.index(corpus)
    got = ours.search_batch(list(queries.values()), 10)
    for i, ranking in enumerate(got):
        want = [(corpus.ids[j], float(s)) for j, s in zip(docs[i], scores[i], strict=True) if s != 0]
        assert [d for d, _ in ranking] == [d for d, _ in want]
        np.testing.assert_allclose([s for _, s in ranking], [s for _, s in want], rtol=1e-6)


@pytest.mark.parametrize("variant", ["okapi", "bm25l", "bm25plus"])
def test_rank_bm25_adapter_equals_raw_rank_bm25_on_shared_tokens(slice_, variant):
    import rank_bm25

    corpus, queries = slice_
    tok = Tokenizer()
    cls = {"okapi": rank_bm25.BM25Okapi, "bm25l": rank_bm25.BM25L, "bm25plus": rank_bm25.BM25Plus}[variant]
    raw = cls(tok.tokenize(corpus.joined_texts()))
    ours = RankBM25Retriever(variant=variant)
    ours.index(corpus)
    texts = list(queries.values())[:10]
    for text, ranking in zip(texts, ours.search_batch(texts, 5), strict=True):
        full = raw.get_scores(tok.tokenize([text])[0])
        assert [s for _, s in ranking] == pytest.approx(sorted(full, reverse=True)[:5])
        assert [full[corpus.index[d]] for d, _ in ranking] == pytest.approx([s for _, s in ranking])


def test_both_adapters_rank_alike_on_scifact(slice_):
    """Same tokens, near-identical BM25 formulas: the top document agrees for most queries."""
    corpus, queries = slice_
    a, b = create("bm25s"), create("rank_bm25")
    a.index(corpus)
    b.index(corpus)
    texts = list(queries.values())
    tops = [(x[0][0], y[0][0]) for x, y in zip(a.search_batch(texts, 1), b.search_batch(texts, 1), strict=True)]
    assert sum(x == y for x, y in tops) >= 0.9 * len(tops)


def test_bm25s_on_full_scifact_test_matches_published_ndcg(scifact):
    """bm25s BEIR recipe (k1 1.5, b 0.75, English stopwords, Snowball): nDCG@10 0.686 +/- 0.003."""
    import pytrec_eval

    qrels = scifact.split("test")
    r = create("bm25s", {"k1": 1.5, "b": 0.75, "stopwords": "en", "stemmer": "english"})
    r.index(scifact.corpus)
    run = r.search(scifact.queries.subset(list(qrels)), 100)
    per_query = pytrec_eval.RelevanceEvaluator(qrels.to_dict(), {"ndcg_cut.10"}).evaluate(run.to_dict())
    ndcg = np.mean([per_query.get(q, {"ndcg_cut_10": 0.0})["ndcg_cut_10"] for q in qrels])
    assert len(qrels) == 300
    assert ndcg == pytest.approx(0.686, abs=0.003)


# -- contract ----------------------------------------------------------------------------------
@pytest.mark.parametrize("adapter", ["bm25s", "rank_bm25"])
def test_queries_without_known_terms_come_back_empty(adapter):
    r = create(adapter, {"stopwords": None, "stemmer": None})
    r.index(toy())
    run = r.search(Queries({"q1": "zebra", "q2": "!!", "q3": "fish"}), 10)
    assert run.status["q1"] is QueryStatus.EMPTY and run.status["q2"] is QueryStatus.EMPTY
    assert run.docs("q3") == ["d3"]
    assert r.search_batch(["fish"], 0) == [[]]


@pytest.mark.parametrize("adapter", ["bm25s", "rank_bm25"])
def test_inputs_are_not_mutated(adapter, slice_):
    corpus, _ = slice_
    ids, texts, titles = list(corpus.ids), list(corpus.texts), list(corpus.titles)
    r = create(adapter)
    r.index(corpus)
    query = ["Some claim about cancer cells"]
    r.search_batch(query, 5)
    assert (list(corpus.ids), list(corpus.texts), list(corpus.titles)) == (ids, texts, titles)
    assert query == ["Some claim about cancer cells"]


def test_search_before_index_is_an_input_error():
    with pytest.raises(InputError, match="no index"):
        BM25SRetriever().search_batch(["x"], 3)
    with pytest.raises(InputError, match="empty corpus"):
        BM25SRetriever().index(Corpus([], []))
    with pytest.raises(InputError, match="no document has an indexable token"):
        RankBM25Retriever().index(Corpus(["a", "b"], ["the of and", ""]))


# -- add / delete ------------------------------------------------------------------------------
@pytest.mark.parametrize(("adapter", "params"), [("bm25s", {}), ("bm25s", {"method": "bm25+"}), ("rank_bm25", {})])
def test_add_and_delete_equal_a_fresh_index(adapter, params, slice_):
    corpus, queries = slice_
    texts = list(queries.values())[:15]
    head, tail = corpus.ids[:250], corpus.ids[250:]
    r = create(adapter, params)
    r.index(corpus.subset(head))
    r.add(corpus.subset(tail))
    fresh = create(adapter, params)
    fresh.index(corpus)
    assert r.search_batch(texts, 10) == fresh.search_batch(texts, 10)
    assert r.describe()["add"] == "full rebuild" and r.n_rebuilds == 1

    gone = [d for ranking in fresh.search_batch(texts, 1) for d, _ in ranking]
    r.delete([*gone, "no-such-id"])
    fresh_rest = create(adapter, params)
    fresh_rest.index(corpus.subset([d for d in corpus.ids if d not in set(gone)]))
    after = r.search_batch(texts, 10)
    assert after == fresh_rest.search_batch(texts, 10)
    assert not {d for ranking in after for d, _ in ranking} & set(gone)
    assert len(r) == len(corpus) - len(set(gone))


def test_add_replaces_a_document_with_the_same_id():
    r = BM25SRetriever(stopwords=None, stemmer=None)
    r.index(toy())
    r.add(Corpus(["d3"], ["zebra"]))
    assert len(r) == 3
    assert r.search_batch(["fish"], 3) == [[]]
    assert [d for d, _ in r.search_batch(["zebra"], 3)[0]] == ["d3"]


# -- save / load -------------------------------------------------------------------------------
def test_bm25s_save_load_round_trip(tmp_path, slice_):
    corpus, queries = slice_
    texts = list(queries.values())
    r = create("bm25s", {"method": "bm25+", "k1": 1.2})
    r.index(corpus)
    r.save(tmp_path / "idx")
    loaded = create("bm25s", {"method": "bm25+", "k1": 1.2})
    loaded.load(tmp_path / "idx")
    assert loaded.search_batch(texts, 10) == r.search_batch(texts, 10)
    assert loaded.fingerprint() == r.fingerprint()
    loaded.add(Corpus(["new"], ["a brand new zebra document"]))  # token lists came back too
    assert loaded.search_batch(["zebra"], 1)[0][0][0] == "new"

    with pytest.raises(ConfigError, match="k1"):
        create("bm25s", {"method": "bm25+", "k1": 0.9}).load(tmp_path / "idx")
    with pytest.raises(InputError, match="not a saved"):
        create("bm25s").load(tmp_path)


def test_rank_bm25_declares_no_save():
    assert "save" not in RankBM25Retriever.capabilities
    assert {"add", "delete", "save", "load"} <= BM25SRetriever.capabilities


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_every_bm25s_method_ranks_the_matching_document_first(method):
    r = create("bm25s", {"method": method, "stopwords": None, "stemmer": None})
    r.index(Corpus(["a", "b", "c", "d"], ["apple pie recipe", "banana bread", "cherry tart", "date loaf"]))
    assert r.search_batch(["banana"], 2)[0][0][0] == "b"
    assert r.describe()["method"] == method


def test_bad_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="method"):
        create("bm25s", {"method": "bm99"})
    with pytest.raises(ConfigError, match="variant"):
        create("rank_bm25", {"variant": "okapi2"})
    with pytest.raises(ConfigError, match="unknown parameter 'k3'"):
        create("bm25s", {"k3": 1})


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_score_matrix_from_streamed_term_counts_is_bit_identical_to_bm25s_own_index(method, slice_):
    import bm25s

    corpus, _ = slice_
    ours = BM25SRetriever(method=method)
    ours.index(corpus)
    vocab: dict[str, int] = {}
    token_ids = ours.tokenizer.tokenize_ids(corpus.joined_texts(), vocab, grow=True)
    raw = bm25s.BM25(method=method)
    raw.index((token_ids, dict(vocab)), show_progress=False)
    for key in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(ours._bm25.scores[key], raw.scores[key])
    assert ours._bm25.scores["data"].dtype == raw.scores["data"].dtype and ours._bm25.vocab_dict == raw.vocab_dict


def test_index_in_batches_is_bit_identical_to_bm25s_over_the_same_batched_ids(slice_, monkeypatch):
    import bm25s

    from retbench.retrievers import bm25 as bm25_module

    corpus, _ = slice_
    monkeypatch.setattr(bm25_module, "TOKENIZE_BATCH", 64)
    ours = BM25SRetriever()
    ours.index(corpus)
    tok, vocab, token_ids = Tokenizer(), {}, []
    texts = corpus.joined_texts()
    for start in range(0, len(texts), 64):
        token_ids += tok.tokenize_ids(texts[start : start + 64], vocab, grow=True)
    raw = bm25s.BM25()
    raw.index((token_ids, dict(vocab)), show_progress=False)
    assert ours._vocab == vocab and len(vocab) > 1000
    for key in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(ours._bm25.scores[key], raw.scores[key])


_WORDS = (
    "the of and cells Running ran QQ qq über Straße STRASSE İstanbul ΣΟΦΙΑΣ σοφίας naïve l’été 中文 文本 ＡＢＣ ﬁnance "
    "β-cell 5α-reductase IL-6 10°C ab² ٣٤ _x a b"
)
_GLUED = ["x\u0301y", "dev\u200dops", "a\U0001f600b", "\U0001d400\U0001d401"]  # combining accent, ZWJ, beyond the BMP


def multilingual(n: int, seed: int) -> list[str]:
    """Texts whose words touch letters, digits and punctuation that are not ASCII (pieces of the fast
    split that hold several tokens), in several scripts and cases, with the break word among them."""
    words = [*_WORDS.split(), *_GLUED]
    rng = random.Random(seed)
    glue = [" ", " ", " ", "", "–", "\xa0", "é", "-", "\n"]
    return ["".join(rng.choice(words) + rng.choice(glue) for _ in range(rng.choice([0, 2, 9, 40]))) for _ in range(n)]


@pytest.mark.parametrize("adapter", ["bm25s", "rank_bm25"])
def test_index_of_text_that_is_not_plain_ascii_equals_the_library_over_bm25s_own_tokens(adapter, monkeypatch):
    """The whole index path (ids in batches, counts, scores) against bm25s.tokenize's strings, numbered
    as retbench numbers them (each batch's new stems after the old ones, in sorted order)."""
    import bm25s
    import rank_bm25
    import Stemmer

    from retbench.retrievers import bm25 as bm25_module

    texts, queries = multilingual(400, 1), [q for q in multilingual(60, 2) if q]
    monkeypatch.setattr(bm25_module, "TOKENIZE_BATCH", 64)
    ours = create(adapter)
    ours.index(Corpus([f"d{i}" for i in range(len(texts))], texts))

    def theirs(batch: list[str]) -> list[list[str]]:
        stem = Stemmer.Stemmer("english")
        return bm25s.tokenize(batch, stopwords="en", stemmer=stem, return_ids=False, show_progress=False)

    vocab: dict[str, int] = {}
    doc_tokens: list[list[str]] = []
    for start in range(0, len(texts), 64):
        batch = theirs(texts[start : start + 64])
        for t in sorted({t for toks in batch for t in toks} - vocab.keys()):
            vocab[t] = len(vocab)
        doc_tokens += batch
    assert ours._vocab == vocab and len(vocab) > 200
    if adapter == "bm25s":
        raw = bm25s.BM25()
        raw.index(([[vocab[t] for t in toks] for toks in doc_tokens], dict(vocab)), show_progress=False)
        for key in ("data", "indices", "indptr"):
            np.testing.assert_array_equal(ours._bm25.scores[key], raw.scores[key])
        return
    model = rank_bm25.BM25Okapi(doc_tokens)
    for text, ranking in zip(queries, ours.search_batch(queries, 400), strict=True):
        full = model.get_scores([t for t in theirs([text])[0] if t in vocab])
        want = {f"d{i}": s for i, s in enumerate(full.tolist()) if s != 0}
        assert dict(ranking).keys() == want.keys()  # the same documents match: the same tokens
        # rank-bm25 sums its IDFs in token order (ids here, strings there): the last bits may differ
        assert dict(ranking) == pytest.approx(want, rel=1e-12)


# -- the columnar search path ----------------------------------------------------------------------
@pytest.mark.parametrize("adapter", ["bm25s", "rank_bm25"])
def test_search_straight_to_columns_equals_the_generic_per_query_path(adapter, slice_):
    corpus, queries = slice_
    r = create(adapter)
    r.index(corpus)
    queries = Queries({**dict(queries.items()), "none": "zebra!!"})  # one query without a known term
    fast, generic = r.search(queries, 20), Retriever.search(r, queries, 20)
    assert fast.query_ids == generic.query_ids
    assert fast.to_dict() == generic.to_dict()
    assert list(fast.doc_ids) == list(generic.doc_ids) and fast.scores.tolist() == generic.scores.tolist()
    assert fast.status == generic.status and fast.status["none"] is QueryStatus.EMPTY
    assert set(fast.latency) == set(generic.latency) and not fast.errors


def test_search_takes_the_generic_path_for_ids_a_run_cannot_hold():
    r = create("bm25s", {"stopwords": None, "stemmer": None})
    r.index(Corpus(["d1", "d 2", "d3"], ["cat cat dog", "dog bird", "fish"]))
    run = r.search(Queries({"q1": "dog", "q2": "fish"}), 10)
    assert run.status["q1"] is QueryStatus.INVALID and "contains ' '" in run.errors["q1"]
    assert run.docs("q2") == ["d3"]


def test_search_before_index_is_recorded_per_query_on_the_columnar_path():
    run = BM25SRetriever().search(Queries({"q1": "x", "q2": "y"}), 3)
    assert run.status["q1"] is QueryStatus.ERROR and "no index" in run.errors["q2"]
