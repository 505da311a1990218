"""Shared by the vector-store tests: one SciFact slice and one set of encoder settings.

Every store test encodes the same few hundred documents with the same settings, so the embedding
cache encodes them once for the whole suite (and the runner test reuses them through the same slice).
"""

from __future__ import annotations

import functools

import pytest

import repo_paths
from retbench.data import Corpus, Qrels, Queries
from retbench.studies.benchmark import DatasetSpec, prepare_dataset

SCIFACT = str(repo_paths.SCIFACT)
#: encoder settings shared by FAISS and the stores in tests (short sequences: cheap to encode)
ENC = {"max_seq_length": 128, "batch_size": 32}
SLICE = {"split": "test", "max_queries": 30, "corpus_sample": 250}


@functools.lru_cache(maxsize=1)
def scifact_slice() -> tuple[Corpus, Queries, Qrels]:
    """30 judged test queries and 250 documents (all their relevant ones plus a seeded sample)."""
    ds, queries = prepare_dataset(DatasetSpec(spec=SCIFACT, **SLICE))
    return ds.corpus, queries, ds.split("test")


def assert_same_ranking(a: list[tuple[str, float]], b: list[tuple[str, float]], tol: float = 1e-5) -> None:
    """Equal rankings up to float noise: same scores per doc within tol; docs may swap only where scores tie within tol."""
    assert len(a) == len(b)
    sa, sb = dict(a), dict(b)
    for doc in sa.keys() & sb.keys():
        assert abs(sa[doc] - sb[doc]) <= tol, (doc, sa[doc], sb[doc])
    cut = min(a[-1][1], b[-1][1]) if a else 0.0
    for doc in sa.keys() ^ sb.keys():  # only at the cut-off, between near-equal scores
        assert abs(sa.get(doc, sb.get(doc, 0.0)) - cut) <= tol, doc
    for (da, xa), (db, xb) in zip(a, b, strict=True):
        assert da == db or abs(xa - xb) <= tol, (da, xa, db, xb)


#: filters the store tests apply (equality, a range, both, a boolean, a string that matches nothing)
FILTERS = [
    {"lang": "de"},
    {"year": {"gte": 2005, "lt": 2012}},
    {"lang": "en", "year": {"gt": 2015}},
    {"open": True},
    {"lang": "fr"},
]


def with_metadata(corpus: Corpus) -> Corpus:
    """The slice with synthetic metadata: lang (en/de by position), year 2000-2019, open (bool)."""
    meta = [
        {"lang": "de" if i % 3 == 0 else "en", "year": 2000 + i % 20, "open": i % 2 == 0} for i in range(len(corpus))
    ]
    return Corpus(list(corpus.ids), list(corpus.texts), list(corpus.titles or []) or None, meta)


def filtered(queries: Queries) -> Queries:
    """The same queries, each carrying one of FILTERS in metadata.filter (cycling)."""
    return Queries(dict(queries), {q: {"filter": FILTERS[i % len(FILTERS)]} for i, q in enumerate(queries)})


def assert_filtered_like_exact(run, reference, corpus: Corpus, queries: Queries, min_overlap: float = 1.0) -> None:
    """Every returned doc passes its query's filter; top-10 overlap with FAISS exact filtered search >= min_overlap."""
    from retbench.retrievers.filters import parse_filter

    meta = dict(zip(corpus.ids, corpus.metadata, strict=True))
    overlaps = []
    for q in queries:
        flt = parse_filter(queries.metadata[q]["filter"])
        docs = list(run.docs(q))
        assert all(flt.matches(meta[d]) for d in docs), (q, flt)
        want = list(reference.docs(q))[:10]
        if flt.as_dict() == {"lang": "fr"}:
            assert not docs and not want
        elif want:
            overlaps.append(len(set(docs[:10]) & set(want)) / len(want))
    assert overlaps and sum(overlaps) / len(overlaps) >= min_overlap, overlaps


def exact_filtered_reference(corpus: Corpus, queries: Queries, k: int = 10):
    """FAISS flat (exact) search with the filters applied: the reference for every store."""
    from retbench.retrievers.base import create

    r = create("dense", {"index": "flat_ip", **ENC})
    r.index(corpus)
    return r.search(queries, k)


def check_add_replace_delete(r, corpus: Corpus, tol: float = 1e-5) -> None:
    """The ingestion contract every store shares, on an un-indexed store `r`: index half, add the rest (a
    document then finds itself), re-add an id with new text (replaced in place, not duplicated), delete it
    (with an unknown id beside it) and it never comes back."""
    half = len(corpus) // 2
    first, rest = corpus.subset(corpus.ids[:half]), corpus.subset(corpus.ids[half:])
    r.index(first)
    probe = rest.joined(1)
    assert rest.ids[1] not in [d for d, _ in r.search_one(probe, 5)]
    r.add(rest)
    assert len(r) == len(corpus)
    top, score = r.search_one(probe, 1)[0]
    assert top == rest.ids[1] and score == pytest.approx(1.0, abs=tol)
    r.add(Corpus([rest.ids[1]], ["an entirely different text about volcano ash"], [""]))
    assert len(r) == len(corpus)
    assert r.search_one("volcano ash", 1)[0][0] == rest.ids[1]
    r.delete([rest.ids[1], "no-such-id"])
    assert len(r) == len(corpus) - 1
    assert rest.ids[1] not in [d for d, _ in r.search_one("volcano ash", len(corpus))]
