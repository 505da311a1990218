"""Exact-text relevance: a chunk matches when its text equals a gold text (edges stripped)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from retbench.chunkers import ChunkSet
from retbench.data import Run
from retbench.metrics.judges.anchors import _squash
from retbench.metrics.judges.common import (
    Groups,
    Judgement,
    _block_pairs,
    _check_groups,
    _chunk_rows,
    _entries,
    _pad,
    _pool_counts,
)


def judge_text(
    run: Run,
    texts: ChunkSet | Mapping[str, str],
    gold: Mapping[str, Sequence[str]],
    *,
    collapse_whitespace: bool = False,
    groups: Groups | None = None,
) -> Judgement:
    """Exact-match relevance: the ranked chunk's text equals a gold text, edges stripped."""

    def norm(t: str) -> str:
        return _squash(t) if collapse_whitespace else t.strip()

    qids = list(gold)
    ent = _entries(run, qids)
    if isinstance(texts, ChunkSet):
        pos = _chunk_rows(run, ent, texts)
        ranked = [texts.texts[p] for p in pos.tolist()]
        pool_texts: Sequence[str] = texts.texts
    else:
        ranked = [texts.get(c, "") for c in run.doc_ids[ent.index].tolist()]
        pool_texts = list(texts.values())
    vocab: dict[str, int] = {}
    gold_codes = [[vocab.setdefault(norm(t), len(vocab)) for t in gold.get(q, ())] for q in qids]
    codes_pad = _pad(gold_codes, -1, np.int64)
    ranked_codes = np.fromiter((vocab.get(norm(t), -2) for t in ranked), dtype=np.int64, count=len(ranked))
    match = ranked_codes[:, None] == codes_pad[ent.rows]
    n_items = (codes_pad >= 0).sum(axis=1)
    # pool: texts of the collection equal to a gold text of the query
    pool_codes = np.fromiter((vocab.get(norm(t), -2) for t in pool_texts), dtype=np.int64, count=len(pool_texts))
    gi, gj = np.nonzero(codes_pad >= 0)
    item_codes = codes_pad[gi, gj]
    pp, pt = _block_pairs(len(pool_texts), len(gi), lambda b: pool_codes[:, None] == item_codes[None, b])
    pool = _pool_counts(len(qids), gi, pt, pp, len(pool_texts))
    return Judgement(qids, ent, match, n_items, pool, _check_groups(qids, n_items, groups))
