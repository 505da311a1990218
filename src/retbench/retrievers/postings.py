"""Term counts of a tokenized corpus as flat arrays, built batch by batch, and BM25 scores from them.

A corpus of a million documents tokenized into Python lists holds one Python int per token (tens of
bytes each): memory that grows with the corpus in objects. `Postings` holds the same information in
four NumPy arrays instead: for every distinct (document, term) pair its document position, term id
and count (int32), plus every document's length in tokens (int64). Documents are tokenized and
counted a batch at a time (`Postings.from_pairs` per batch, then `concat`), so only one batch of tokens
exists at once. Add, delete and save work on these arrays; nothing keeps the token lists.

`bm25s_matrix` computes bm25s's score matrix from the arrays: the BM25 variants' IDF and term-frequency
components as Kamphuis et al. define them ("Which BM25 do you mean? A large-scale reproducibility study of
scoring variants", ECIR 2020), written here over arrays, evaluated in the same order and precision as bm25s
(float64 terms, IDF per term with `math.log`, stored as the model's dtype), and laid out as bm25s's CSC
matrix (columns are terms, rows within a column in document order). The scores are bit-identical to
`bm25s.BM25.index` on the same token ids (tests assert equality for every method) without calling any
private bm25s function, so a bm25s release that renames its internals cannot break indexing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from retbench.io.files import save_array

_FILES = ("doc", "term", "count", "lengths")


@dataclass
class Postings:
    """(document, term, count) for every distinct pair, sorted by document then term; document lengths."""

    doc: np.ndarray  # int32
    term: np.ndarray  # int32
    count: np.ndarray  # int32
    lengths: np.ndarray  # int64, tokens per document (repeats counted)

    @classmethod
    def empty(cls) -> Postings:
        z = np.zeros(0, dtype=np.int32)
        return cls(z, z.copy(), z.copy(), np.zeros(0, dtype=np.int64))

    @classmethod
    def from_pairs(cls, owner: np.ndarray, term: np.ndarray, n_docs: int, first_doc: int = 0) -> Postings:
        """Count one batch of tokens given as (document position in the batch, term id), one pair per
        token occurrence in any order (documents numbered from `first_doc`; `n_docs` counts the empty ones)."""
        owner = owner.astype(np.int64, copy=False)
        lengths = np.bincount(owner, minlength=n_docs).astype(np.int64, copy=False)
        keys, counts = np.unique(((owner + first_doc) << 32) | term.astype(np.int64, copy=False), return_counts=True)
        return cls(
            (keys >> 32).astype(np.int32), (keys & 0xFFFFFFFF).astype(np.int32), counts.astype(np.int32), lengths
        )

    @classmethod
    def from_token_lists(cls, tokens: Sequence[Sequence[int]], first_doc: int = 0) -> Postings:
        """Count one batch of token-id lists (documents numbered from `first_doc`)."""
        lengths = np.fromiter((len(t) for t in tokens), dtype=np.int64, count=len(tokens))
        flat = np.fromiter(chain.from_iterable(tokens), dtype=np.int64, count=int(lengths.sum()))
        return cls.from_pairs(np.repeat(np.arange(len(tokens), dtype=np.int64), lengths), flat, len(tokens), first_doc)

    @classmethod
    def concat(cls, parts: Sequence[Postings]) -> Postings:
        if not parts:
            return cls.empty()
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FILES))

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f).nbytes for f in _FILES)

    def keep(self, positions: Sequence[int], n_terms: int) -> tuple[Postings, np.ndarray]:
        """Only the documents at `positions` (renumbered in that order) and only the terms they still use.

        Returns the new postings and the kept old term ids in order (new id = index in that array).
        """
        pos = np.asarray(positions, dtype=np.int64)
        new_doc = np.full(len(self), -1, dtype=np.int64)
        new_doc[pos] = np.arange(len(pos))
        mask = new_doc[self.doc] >= 0
        doc, term, count = new_doc[self.doc[mask]], self.term[mask], self.count[mask]
        used = np.flatnonzero(np.bincount(term, minlength=n_terms))
        remap = np.full(n_terms, -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        order = np.lexsort((remap[term], doc))
        kept = Postings(
            doc[order].astype(np.int32),
            remap[term][order].astype(np.int32),
            count[order],
            self.lengths[pos],
        )
        return kept, used

    def token_lists(self) -> list[list[int]]:
        """Each document as a list of term ids (repeats expanded; the order within a document is not kept)."""
        flat = np.repeat(
            self.term, self.count
        ).tolist()  # sorted by document, and a document's counts sum to its length
        out: list[list[int]] = []
        start = 0
        for n in self.lengths.tolist():
            out.append(flat[start : start + n])
            start += n
        return out

    def save(self, folder: Path) -> None:
        for f in _FILES:
            save_array(folder / f"postings.{f}.npy", getattr(self, f))

    @classmethod
    def load(cls, folder: Path) -> Postings | None:
        paths = [folder / f"postings.{f}.npy" for f in _FILES]
        if not all(p.is_file() for p in paths):
            return None
        return cls(*(np.load(p) for p in paths))


# -- BM25 variants (Kamphuis et al., ECIR 2020); N documents, df a term's document frequency ------------
def _idf(method: str, df: int, n: int) -> float:
    """A term's IDF, in Python floats as bm25s evaluates it (math.log, not np.log: the last bit must agree)."""
    if method == "robertson":  # log((N - df + 0.5) / (df + 0.5)), floored at log(1) = 0
        return math.log(max((n - df + 0.5) / (df + 0.5), 1))
    if method == "lucene":
        return math.log(1 + (n - df + 0.5) / (df + 0.5))
    if method == "atire":
        return math.log(n / df)
    if method == "bm25l":
        return math.log((n + 1) / (df + 0.5))
    if method == "bm25+":
        return math.log((n + 1) / df)
    raise ValueError(f"unknown BM25 method {method!r}")


def _tfc(method: str, tf: Any, l_d: Any, l_avg: float, k1: float, b: float, delta: float) -> Any:
    """The term-frequency component for term counts `tf` in documents of length `l_d` (arrays or floats)."""
    if method in ("robertson", "lucene"):
        return tf / (k1 * ((1 - b) + b * l_d / l_avg) + tf)
    if method == "atire":
        return (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * l_d / l_avg))
    if method == "bm25l":
        c = tf / (1 - b + b * l_d / l_avg)
        return ((k1 + 1) * (c + delta)) / (k1 + c + delta)
    if method == "bm25+":
        return ((k1 + 1) * tf) / (k1 * (1 - b + b * l_d / l_avg) + tf) + delta
    raise ValueError(f"unknown BM25 method {method!r}")


# BM25L and BM25+ give a document a term's score at tf = 0 too; bm25s stores the scores minus that share
NONOCCURRENCE = ("bm25l", "bm25+")


def bm25s_matrix(model: Any, postings: Postings, n_vocab: int) -> dict[str, Any]:
    """bm25s's `scores` dict (CSC data, indices, indptr, num_docs) for these postings, as `BM25.index` builds it.

    Reads the model's public settings (method, idf_method, k1, b, delta, dtype, int_dtype) and sets its
    `nonoccurrence_array` (None unless the method needs one), as `BM25.index` does.
    """
    n_docs = len(postings)
    avg_doc_len = postings.lengths.mean()
    df_counts = np.bincount(postings.term, minlength=n_vocab).tolist()
    k1, b, delta = model.k1, model.b, model.delta
    idf = np.zeros(n_vocab, dtype=model.dtype)
    for term, df in enumerate(df_counts):
        if df:
            idf[term] = _idf(model.idf_method, df, n_docs)
    nonocc = None
    if model.method in NONOCCURRENCE:
        tfc0 = _tfc(model.method, 0, avg_doc_len, avg_doc_len, k1, b, delta)
        nonocc = np.zeros(n_vocab, dtype=model.dtype)
        for term, df in enumerate(df_counts):
            if df:
                nonocc[term] = _idf(model.idf_method, df, n_docs) * tfc0
    model.nonoccurrence_array = nonocc
    tf = postings.count.astype(model.dtype)
    # per pair: the same float64 expression bm25s evaluates per document (l_d a Python int there)
    l_d = postings.lengths[postings.doc].astype(np.float64)
    scores = idf[postings.term] * _tfc(model.method, tf, l_d, avg_doc_len, k1, b, delta)
    if nonocc is not None:
        scores -= nonocc[postings.term]
    scores = scores.astype(model.dtype)
    # CSC: columns are terms; a stable sort keeps each column's rows in document order (postings are by document)
    order = np.argsort(postings.term, kind="stable")
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(np.bincount(postings.term, minlength=n_vocab), out=indptr[1:])
    indices = postings.doc.astype(model.int_dtype)[order]
    return {"data": scores[order].astype(model.dtype), "indices": indices, "indptr": indptr, "num_docs": n_docs}
