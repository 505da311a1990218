"""The chunk <-> document <-> span mapping: spans, chunks, and a corpus's chunks as columns.

Every chunk carries its document id and `[start, end)` character offsets with
`doc_text[start:end] == chunk.text`, so relevance given as character spans (or documents) maps onto
the chunks of any chunker; id-based qrels cannot compare chunkers, offsets can.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retbench.data import Corpus
from retbench.jsontypes import JSONObject


@dataclass(frozen=True)
class Span:
    """A character range `[start, end)` of one document."""

    doc_id: str
    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"bad span [{self.start}, {self.end}) in {self.doc_id!r}")

    def __len__(self) -> int:
        return self.end - self.start

    def overlap(self, other: Span) -> int:
        """Characters shared with another span (0 across documents)."""
        if other.doc_id != self.doc_id:
            return 0
        return max(0, min(self.end, other.end) - max(self.start, other.start))


@dataclass(frozen=True)
class Chunk:
    """A slice of a document: `doc_text[start:end] == text`."""

    id: str
    doc_id: str
    start: int
    end: int
    text: str
    heading_path: str = ""
    n_tokens: int | None = None

    @property
    def span(self) -> Span:
        return Span(self.doc_id, self.start, self.end)


class ChunkSet:
    """The chunks of a corpus as columns, with lookups from chunk ids to documents and spans."""

    def __init__(
        self, chunks: Sequence[Chunk], doc_ids: Iterable[str], chunker: Mapping[str, Any] | None = None
    ) -> None:
        self.chunks = list(chunks)
        self.doc_ids = list(doc_ids)
        self.chunker = dict(chunker or {})
        self.ids = [c.id for c in self.chunks]
        self.texts = [c.text for c in self.chunks]
        self.chunk_doc_ids = [c.doc_id for c in self.chunks]
        self.heading_paths = [c.heading_path for c in self.chunks]
        self.starts = np.asarray([c.start for c in self.chunks], dtype=np.int64)
        self.ends = np.asarray([c.end for c in self.chunks], dtype=np.int64)
        self.n_tokens = np.asarray([c.n_tokens if c.n_tokens is not None else -1 for c in self.chunks], dtype=np.int64)
        doc_pos = {d: i for i, d in enumerate(self.doc_ids)}
        self.doc_index = np.asarray([doc_pos[c.doc_id] for c in self.chunks], dtype=np.int64)
        self.index = {cid: i for i, cid in enumerate(self.ids)}
        if len(self.index) != len(self.ids):
            raise ValueError("chunk ids are not unique")

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, chunk_id: str) -> Chunk:
        return self.chunks[self.index[chunk_id]]

    def positions(self, chunk_ids: Sequence[str]) -> np.ndarray:
        """Row of each chunk id; -1 for ids that are not chunks of this set."""
        return np.fromiter((self.index.get(c, -1) for c in chunk_ids), dtype=np.int64, count=len(chunk_ids))

    def to_corpus(self, name: str = "") -> Corpus:
        """The chunks as a corpus for retrievers: id = chunk id, text = chunk text exactly."""
        meta: list[JSONObject] = [
            {"doc_id": c.doc_id, "start": c.start, "end": c.end, "heading_path": c.heading_path} for c in self.chunks
        ]
        return Corpus(self.ids, self.texts, None, meta, join_rule="text_only", name=name)

    def overlapping(self, span: Span, min_overlap: int = 1) -> list[str]:
        """Ids of chunks sharing at least `min_overlap` characters with a span."""
        mask = np.fromiter((d == span.doc_id for d in self.chunk_doc_ids), dtype=bool, count=len(self))
        inter = np.minimum(self.ends, span.end) - np.maximum(self.starts, span.start)
        return [self.ids[i] for i in np.flatnonzero(mask & (inter >= max(1, min_overlap)))]

    def docs_without_chunks(self) -> list[str]:
        """Documents that produced no chunk (empty or whitespace-only texts)."""
        have = (
            np.bincount(self.doc_index, minlength=len(self.doc_ids))
            if len(self)
            else np.zeros(len(self.doc_ids), dtype=np.int64)
        )
        return [d for d, n in zip(self.doc_ids, have, strict=True) if n == 0]

    def stats(self, max_tokens: int | None = None) -> dict[str, Any]:
        """Indexing coverage: chunk count, tokens per chunk, empty docs, over-length chunks."""
        tok = self.n_tokens[self.n_tokens >= 0]
        chars = self.ends - self.starts
        out: dict[str, Any] = {
            "n_docs": len(self.doc_ids),
            "n_chunks": len(self),
            "docs_without_chunks": len(self.docs_without_chunks()),
            "chars_mean": float(chars.mean()) if len(chars) else 0.0,
        }
        if len(tok):
            out.update(
                tokens_min=int(tok.min()),
                tokens_mean=float(tok.mean()),
                tokens_p95=float(np.percentile(tok, 95)),
                tokens_max=int(tok.max()),
            )
        if max_tokens is not None and len(tok):
            over = int((tok > max_tokens).sum())
            out.update(max_tokens=max_tokens, chunks_over_max=over, chunks_over_max_rate=over / len(tok))
        return out
