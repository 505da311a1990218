"""Anchor relevance: same document (rel_path), heading_path prefix, optional snippet."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retbench.chunkers import ChunkSet
from retbench.chunkers.headings import normalize_heading_path
from retbench.data import Run
from retbench.metrics.judges.common import (
    Groups,
    Judgement,
    _check_groups,
    _chunk_rows,
    _entries,
    _pad,
    _pool_counts,
    _supports,
)


@dataclass(frozen=True)
class Anchor:
    """A gold support by location: document (`rel_path`), heading path prefix, optional snippet."""

    rel_path: str
    heading_path: str | tuple[str, ...] = ()
    snippet: str | None = None

    def path(self) -> tuple[str, ...]:
        return normalize_heading_path(self.heading_path)


def _squash(text: str) -> str:
    return " ".join(text.split())


def judge_anchors(
    run: Run,
    chunks: ChunkSet,
    gold: Mapping[str, Sequence[Anchor]],
    *,
    snippets: bool = True,
    groups: Groups | None = None,
) -> Judgement:
    """Anchor relevance: same rel_path, heading-path prefix, and snippet when given.

    `groups` (multi-hop `required_support_groups`) lists, per query, groups of anchor indexes of
    which one each must be found for `recall_all`.
    """
    qids = list(gold)
    ent = _entries(run, qids)
    pos = _chunk_rows(run, ent, chunks)
    # every (document, heading-path prefix) of each chunk of the set -> those chunks
    by_prefix: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    for p, (doc, path) in enumerate(zip(chunks.chunk_doc_ids, chunks.heading_paths, strict=True)):
        parts = normalize_heading_path(path)
        for depth in range(len(parts) + 1):
            by_prefix.setdefault((doc, parts[:depth]), []).append(p)
    pair_chunk: list[int] = []
    pair_item: list[int] = []
    item_row: list[int] = []
    anchor_code: list[list[int]] = []
    for i, q in enumerate(qids):
        codes = []
        for a in gold.get(q, ()):
            cands = by_prefix.get((a.rel_path, a.path()), [])
            if snippets and a.snippet:
                needle = _squash(a.snippet)
                cands = [p for p in cands if needle in _squash(chunks.texts[p])]
            code = len(item_row)
            pair_chunk.extend(cands)
            pair_item.extend([code] * len(cands))
            codes.append(code)
            item_row.append(i)
        anchor_code.append(codes)
    codes_pad = _pad(anchor_code, -1, np.int64)
    pair_keys = np.asarray(pair_chunk, dtype=np.int64) * (1 << 32) + np.asarray(pair_item, dtype=np.int64)
    cell = pos.astype(np.int64)[:, None] * (1 << 32) + codes_pad[ent.rows]
    match = np.isin(cell, pair_keys) & (codes_pad[ent.rows] >= 0)
    n_items = (codes_pad >= 0).sum(axis=1)
    pool = _pool_counts(
        len(qids),
        np.asarray(item_row, dtype=np.int64),
        np.asarray(pair_item, dtype=np.int64),
        np.asarray(pair_chunk, dtype=np.int64),
        len(chunks),
    )
    rows = np.asarray(item_row, dtype=np.int64)
    cols = np.concatenate([np.arange(len(c), dtype=np.int64) for c in anchor_code]) if item_row else rows
    supports = _supports(
        n_items, rows, cols, np.asarray(pair_item, np.int64), np.asarray(pair_chunk, np.int64), chunks.ids
    )
    return Judgement(qids, ent, match, n_items, pool, _check_groups(qids, n_items, groups), supports)


# -- exact text and cosine ------------------------------------------------------------------------
