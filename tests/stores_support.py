"""Shared by the vector-store tests: one SciFact slice and one set of encoder settings.

Every store test encodes the same few hundred documents with the same settings, so the embedding
cache encodes them once for the whole suite (and the runner test reuses them through the same slice).
"""

from __future__ import annotations

import functools
from pathlib import Path

from retbench.data import Corpus, Qrels, Queries
from retbench.studies.benchmark import DatasetSpec, prepare_dataset

SCIFACT = str(Path(__file__).resolve().parents[1] / "corpora" / "scifact")
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
