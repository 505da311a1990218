"""Document pooling: judge chunks by the qrels of the document they come from (first chunk's rank)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from retbench.chunkers import ChunkSet
from retbench.data import Qrels, Run
from retbench.metrics.gain import GainMatrix
from retbench.metrics.judges.qrels import judge_qrels


def pool_documents(run: Run, chunks: ChunkSet | Mapping[str, str]) -> Run:
    """A document run from a chunk run: each document at the rank of its first (best) chunk."""
    if isinstance(chunks, ChunkSet):
        doc_of = np.asarray(chunks.chunk_doc_ids, dtype=object)
        pos = chunks.positions(run.doc_ids.tolist())
        if (pos < 0).any():
            raise ValueError(
                f"run {run.name!r} ranks {run.doc_ids[pos < 0][0]!r}, which is not a chunk of this chunk set"
            )
        docs = doc_of[pos] if len(pos) else np.zeros(0, dtype=object)
    else:
        docs = np.asarray([chunks[c] for c in run.doc_ids], dtype=object)
    # Run keeps the first occurrence of a repeated id: in a sorted run that is the best chunk
    return Run(
        run.query_ids,
        run.offsets,
        docs,
        run.scores,
        status=run.status,
        latency=run.latency,
        latency_batch=run.latency_batch,
        errors=run.errors,
        name=run.name,
    )


def top_documents(run: Run, chunks: ChunkSet | Mapping[str, str], depth: int) -> Run:
    """The first `depth` distinct documents of each query of a chunk run, each at its best chunk's rank.

    Collapsing chunks to their documents is not a duplicate in the run's sense, so the result
    counts none (`n_duplicates` 0); statuses, latencies and errors are the chunk run's.
    """
    docs = pool_documents(run, chunks).truncate(depth)
    docs.n_duplicates = 0
    return docs


def judge_documents(
    run: Run, chunks: ChunkSet | Mapping[str, str], qrels: Qrels | Mapping[str, Mapping[str, int]]
) -> GainMatrix:
    """Document-level qrels (e.g. BEIR) applied to a chunk run by max-pooling chunks to documents."""
    return judge_qrels(pool_documents(run, chunks), qrels)


# -- anchors ----------------------------------------------------------------------------------------
