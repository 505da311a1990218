"""Novelty of a document against a knowledge base: per chunk, 1 - the best cosine to K's chunks.

    Novelty(d, K) = 1 - max_{c in chunks(d), c' in chunks(K)} cos(c, c')

per chunk 1 - max_{c'} cos(c, c'); per document the min and the mean over d's chunks, with the nearest
existing chunk and document (the min is the headline definition).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from retbench.chunkers import Chunker, sentence_spans
from retbench.data import Corpus
from retbench.errors import InputError
from retbench.results.impact import Novelty

if TYPE_CHECKING:  # the model loads only when a study encodes
    from retbench.retrievers.encoders.encoder import Encoder


# -- small helpers ---------------------------------------------------------------------------------
def text_hash(text: str) -> str:
    """Identity of a document's indexed text (exact duplicates under another id share it)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def split_sentences(text: str) -> list[str]:
    """Sentences of a text, by the chunking module's rule (. ! ? followed by space, and newlines)."""

    return [text[a:b] for a, b in sentence_spans(text)]


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """L2-normalized float32 rows: cosine is then an inner product whatever the encoder did."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


@dataclass
class ChunkTable:
    """Chunks of some documents as columns: ids, owning document row, offsets in the document, texts."""

    ids: list[str]
    doc_rows: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    texts: list[str]


def chunk_table(corpus: Corpus, chunker: Chunker | None = None) -> ChunkTable:
    """Chunk a corpus for novelty. No chunker: each document is one chunk, its indexed text (title + text), so
    the vectors are the retrieval vectors; with a chunker (chunking.make_chunker), chunks of the text with exact offsets."""
    ids: list[str] = []
    rows: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    texts: list[str] = []
    for i in range(len(corpus)):
        doc_id = str(corpus.ids[i])
        if chunker is None:
            text = corpus.joined(i)
            parts = [(doc_id, 0, len(text), text)] if text.strip() else []
        else:
            parts = [(c.id, c.start, c.end, c.text) for c in chunker.chunk(doc_id, corpus.texts[i])]
        if not parts:
            raise InputError(f"document {doc_id!r} has no text to compare (empty)", field="text")
        for cid, a, b, t in parts:
            ids.append(cid)
            rows.append(i)
            starts.append(a)
            ends.append(b)
            texts.append(t)
    return ChunkTable(
        ids,
        np.asarray(rows, dtype=np.int64),
        np.asarray(starts, dtype=np.int64),
        np.asarray(ends, dtype=np.int64),
        texts,
    )


class NoveltyIndex:
    """Exact cosine nearest neighbours among the knowledge base's chunks: a FAISS flat inner-product index
    over L2-normalized chunk vectors, grown by FAISS `add` (never rebuilt)."""

    def __init__(self, encoder: Encoder, chunker: Chunker | None = None) -> None:
        self.encoder = encoder
        self.chunker = chunker
        self._index: Any = None
        self._chunk_ids: list[str] = []
        self._chunk_docs: list[str] = []
        self._doc_chunks: dict[str, int] = {}

    def describe(self) -> dict[str, object]:
        return {
            "chunker": self.chunker.describe()
            if self.chunker is not None
            else "none (one chunk per document: title + text)",
            "similarity": "cosine (FAISS IndexFlatIP on L2-normalized vectors, exact)",
        }

    def __len__(self) -> int:
        return len(self._chunk_ids)

    def encode(self, corpus: Corpus) -> tuple[ChunkTable, np.ndarray]:
        table = chunk_table(corpus, self.chunker)
        return table, normalize_rows(self.encoder.encode_documents(table.texts))

    def add(self, corpus: Corpus, encoded: tuple[ChunkTable, np.ndarray] | None = None) -> None:
        """Add documents' chunks (FAISS add)."""
        import faiss

        table, vecs = encoded or self.encode(corpus)
        if self._index is None:
            self._index = faiss.IndexFlatIP(vecs.shape[1])
        self._index.add(vecs)
        self._chunk_ids.extend(table.ids)
        for r in table.doc_rows.tolist():
            d = str(corpus.ids[r])
            self._chunk_docs.append(d)
            self._doc_chunks[d] = self._doc_chunks.get(d, 0) + 1

    def _nearest(self, vecs: np.ndarray, exclude: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray]:
        """Best cosine and chunk label per vector, skipping chunks of the document named in `exclude`."""
        n = len(vecs)
        if self._index is None or self._index.ntotal == 0 or n == 0:
            return np.full(n, -np.inf, dtype=np.float64), np.full(n, -1, dtype=np.int64)
        own = max([self._doc_chunks.get(d, 0) for d in exclude if d is not None], default=0)
        kk = min(own + 1, self._index.ntotal)
        sims, labels = self._index.search(np.ascontiguousarray(vecs, dtype=np.float32), kk)
        if own == 0:
            return sims[:, 0].astype(np.float64), labels[:, 0]
        docs = np.asarray(self._chunk_docs, dtype=object)
        ex = np.asarray(exclude, dtype=object)
        ok = (labels >= 0) & (docs[np.maximum(labels, 0)] != ex[:, None])
        first = np.argmax(ok, axis=1)
        found = ok[np.arange(n), first]
        best = np.where(found, sims[np.arange(n), first], -np.inf)
        lab = np.where(found, labels[np.arange(n), first], -1)
        return best.astype(np.float64), lab

    def novelty(
        self,
        corpus: Corpus,
        *,
        leave_one_out: bool = False,
        sequential: Sequence[bool] | None = None,
        encoded: tuple[ChunkTable, np.ndarray] | None = None,
    ) -> list[Novelty]:
        """Novelty of each document of `corpus` against the index.

        `leave_one_out`: the documents are in the index; each is compared with the rest (its own chunks
        excluded). `sequential`: a mask of documents that are ingested in order; document j is also compared
        with the chunks of earlier documents i < j whose mask is true.
        """
        table, vecs = encoded or self.encode(corpus)
        doc_of_chunk = [str(corpus.ids[r]) for r in table.doc_rows.tolist()]
        exclude: list[str | None] = list(doc_of_chunk) if leave_one_out else [None] * len(vecs)
        best, lab = self._nearest(vecs, exclude)
        best = np.minimum(best, 1.0)  # normalized float32 vectors can overshoot cos 1 by rounding
        near_chunk = [self._chunk_ids[x] if x >= 0 else None for x in lab.tolist()]
        near_doc = [self._chunk_docs[x] if x >= 0 else None for x in lab.tolist()]
        if sequential is not None and len(vecs):
            mask = np.asarray(sequential, dtype=bool)
            rows = table.doc_rows
            sims = vecs @ vecs.T
            earlier = (rows[None, :] < rows[:, None]) & mask[rows][None, :]
            sims = np.where(earlier, sims, -np.inf)
            j = np.argmax(sims, axis=1)
            s = sims[np.arange(len(vecs)), j]
            for c in np.flatnonzero(s > best).tolist():
                best[c] = min(float(s[c]), 1.0)
                near_chunk[c] = table.ids[j[c]]
                near_doc[c] = doc_of_chunk[j[c]]
        out: list[Novelty] = []
        order = np.argsort(table.doc_rows, kind="stable")
        bounds = np.searchsorted(table.doc_rows[order], np.arange(len(corpus) + 1))
        for i in range(len(corpus)):
            idx = order[bounds[i] : bounds[i + 1]]
            cos = best[idx]
            nov = 1.0 - np.where(np.isfinite(cos), cos, 0.0)  # nothing to compare with: fully novel
            top = int(idx[np.argmax(cos)])
            chunks = [
                {
                    "chunk_id": table.ids[c],
                    "start": int(table.starts[c]),
                    "end": int(table.ends[c]),
                    "novelty": float(1.0 - best[c]) if np.isfinite(best[c]) else 1.0,
                    "nearest_chunk": near_chunk[c],
                    "nearest_doc": near_doc[c],
                    "cos": float(best[c]) if np.isfinite(best[c]) else None,
                }
                for c in idx.tolist()
            ]
            out.append(
                Novelty(
                    min=float(nov.min()),
                    mean=float(nov.mean()),
                    max_cos=float(best[top]) if np.isfinite(best[top]) else float("nan"),
                    nearest_doc=near_doc[top],
                    nearest_chunk=near_chunk[top],
                    chunks=chunks,
                )
            )
        return out
