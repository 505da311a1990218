"""Span relevance: a chunk matches a gold excerpt of the same document when they overlap enough.

Also character-level precision, recall and IoU of the top-k chunks, and token-budget cutoffs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from retbench.chunkers import ChunkSet, Span
from retbench.data import Run
from retbench.metrics.judges.common import (
    NEVER,
    Groups,
    Judgement,
    _block_pairs,
    _check_groups,
    _chunk_rows,
    _entries,
    _pad,
    _pool_counts,
    _supports,
)


def _gold_spans(
    gold: Mapping[str, Sequence[Span]], qids: Sequence[str], chunks: ChunkSet
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Padded [n_q, G] document row (-1 = no item), start and end of each gold span."""
    doc_pos = {d: i for i, d in enumerate(chunks.doc_ids)}
    docs: list[list[int]] = []
    for q in qids:
        row = []
        for s in gold.get(q, ()):
            if s.doc_id not in doc_pos:
                raise ValueError(
                    f"gold span of query {q!r} is in document {s.doc_id!r}, which the chunk set does not hold"
                )
            row.append(doc_pos[s.doc_id])
        docs.append(row)
    starts = _pad([[s.start for s in gold.get(q, ())] for q in qids], 0, np.int64)
    ends = _pad([[s.end for s in gold.get(q, ())] for q in qids], 0, np.int64)
    return _pad(docs, -1, np.int64), starts, ends


def judge_spans(
    run: Run,
    chunks: ChunkSet,
    gold: Mapping[str, Sequence[Span]],
    *,
    min_chars: int = 1,
    min_fraction: float = 0.0,
    groups: Groups | None = None,
) -> Judgement:
    """Span relevance: a chunk is relevant when it overlaps a gold excerpt of its query.

    Overlap must reach `min_chars` characters and `min_fraction` of the excerpt's length.
    Rows follow `gold`'s query order.
    """
    qids = list(gold)
    ent = _entries(run, qids)
    pos = _chunk_rows(run, ent, chunks)
    gdoc, gs, ge = _gold_spans(gold, qids, chunks)

    def overlaps(c: np.ndarray, d: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Chunks `c` (column vector of set rows) against gold spans (d, s, e), broadcast."""
        inter = np.minimum(chunks.ends[c], e) - np.maximum(chunks.starts[c], s)
        need = np.maximum(max(1, min_chars), np.ceil(min_fraction * (e - s)))
        return (chunks.doc_index[c] == d) & (d >= 0) & (inter >= need)

    match = overlaps(pos[:, None], gdoc[ent.rows], gs[ent.rows], ge[ent.rows])
    gi, gj = np.nonzero(gdoc >= 0)
    idoc, istart, iend = gdoc[gi, gj], gs[gi, gj], ge[gi, gj]
    every = np.arange(len(chunks))[:, None]
    pp, pt = _block_pairs(len(chunks), len(gi), lambda b: overlaps(every, idoc[b], istart[b], iend[b]))
    n_items = (gdoc >= 0).sum(axis=1)
    pool = _pool_counts(len(qids), gi, pt, pp, len(chunks))
    supports = _supports(n_items, gi, gj, pt, pp, chunks.ids)
    return Judgement(qids, ent, match, n_items, pool, _check_groups(qids, n_items, groups), supports)


def _union_length(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(groups, covered length) of the union of intervals within each group, vectorized."""
    if len(group) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    big = int(end.max()) + 1
    ks, ke = group * big + start, group * big + end
    order = np.argsort(ks, kind="stable")
    ks, ke, grp = ks[order], ke[order], group[order]
    reach = np.maximum.accumulate(ke)
    prev = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
    contrib = np.maximum(0, ke - np.maximum(ks, prev))
    return grp, contrib


def overlap_scores(
    run: Run,
    chunks: ChunkSet,
    gold: Mapping[str, Sequence[Span]],
    k: int | np.ndarray | None,
) -> dict[str, np.ndarray]:
    """Per query: character-level precision, recall and IoU of the top-k chunks' union vs the gold union.

    Also returns the sizes `retrieved_chars`, `gold_chars` and `overlap_chars`. A query with
    nothing retrieved scores 0 on all three.
    """
    qids = list(gold)
    n = len(qids)
    ent = _entries(run, qids)
    pos = _chunk_rows(run, ent, chunks)
    kk = (
        np.full(n, NEVER, np.int64)
        if k is None
        else (np.full(n, int(k), np.int64) if np.isscalar(k) else np.asarray(k, np.int64))  # type: ignore[arg-type]
    )
    keep = ent.ranks < kk[ent.rows]
    n_docs = max(len(chunks.doc_ids), 1)
    r_row = ent.rows[keep]
    r_grp = r_row * n_docs + chunks.doc_index[pos[keep]]
    r_s, r_e = chunks.starts[pos[keep]], chunks.ends[pos[keep]]
    gdoc, gs, ge = _gold_spans(gold, qids, chunks)
    gi, gj = np.nonzero(gdoc >= 0)
    g_grp = gi * n_docs + gdoc[gi, gj]

    def per_query(grp: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        g, length = _union_length(grp.astype(np.int64), s.astype(np.int64), e.astype(np.int64))
        return np.bincount(g // n_docs, weights=length, minlength=n).astype(np.float64)

    retrieved = per_query(r_grp, r_s, r_e)
    gold_len = per_query(g_grp, gs[gi, gj], ge[gi, gj])
    union = per_query(
        np.concatenate([r_grp, g_grp]), np.concatenate([r_s, gs[gi, gj]]), np.concatenate([r_e, ge[gi, gj]])
    )
    inter = retrieved + gold_len - union

    def ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.divide(a, b, out=np.zeros(n), where=b > 0)

    return {
        "precision": ratio(inter, retrieved),
        "recall": ratio(inter, gold_len),
        "iou": ratio(inter, union),
        "retrieved_chars": retrieved,
        "gold_chars": gold_len,
        "overlap_chars": inter,
    }


def budget_label(budget: int) -> str:
    """The suffix of a metric read at a context budget: recall@512tok is recall over the chunks that fit 512 tokens."""
    return f"@{budget}tok"


def budget_cutoffs(run: Run, chunks: ChunkSet, query_ids: Sequence[str], budget: int) -> np.ndarray:
    """Per query, how many top chunks fit in `budget` tokens taken in rank order (a strict prefix)."""
    ent = _entries(run, list(query_ids))
    pos = _chunk_rows(run, ent, chunks)
    tokens = chunks.n_tokens[pos]
    if (tokens < 0).any():
        raise ValueError("a context budget needs token counts for every chunk")
    cum = np.cumsum(tokens)
    before = np.repeat(np.concatenate([[0], cum])[np.concatenate([[0], np.cumsum(ent.lengths)])[:-1]], ent.lengths)
    fits = (cum - before) <= budget
    return np.bincount(ent.rows[fits], minlength=len(query_ids)).astype(np.int64)


# -- documents ---------------------------------------------------------------------------------------
