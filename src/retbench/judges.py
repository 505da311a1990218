"""Relevance judges beyond id qrels: spans, documents, anchors, exact text and cosine threshold.

Each judge turns a Run of chunk ids into a `Judgement`: the same `GainMatrix` that id qrels give
(so every rank metric in `metrics.ranking` works with every notion of relevance) plus the gold
*items* each ranked chunk matched, from which item-level recall and multi-hop recall follow.

How the judges decide (a "gold item" is a gold excerpt, anchor, text or embedding of a query):

- spans: a chunk matches a gold excerpt when both lie in the same document and share at least
  `min_chars` characters and at least `min_fraction` of the excerpt;
- anchors (seed 002): same `rel_path` (the chunk's document id) and the chunk's `heading_path`
  starts with the gold `heading_path`, compared part by part after normalizing the delimiter
  (`>`, `›`, `»`) and whitespace; optionally the chunk text must contain the gold snippet;
- exact text (seed 004): the chunk text equals a gold text (edges stripped; optionally whitespace
  collapsed);
- cosine (seed 004): the cosine of the chunk's embedding and a gold embedding is >= threshold.

Grades and counts. A ranked chunk's grade is 1 when it matches any gold item of its query, else 0.
Two different things get counted, on purpose:

- the GainMatrix's relevant count (its ideal) is the number of *chunks of the collection* that match
  a gold item (for spans: every chunk of the chunk set overlapping an excerpt). So every metric of
  `metrics.ranking` (nDCG, MAP, R-precision, P@k, MRR, hit@k, chunk-level recall) reads as on id
  qrels of this chunking and stays within [0, 1];
- `Judgement.recall` (and `recall_any` / `recall_all` / `f1`) count *gold items*: recall@k is the
  share of a query's gold excerpts (anchors, texts, embeddings) matched by some top-k chunk. That
  is the recall@k reported for span relevance (`evaluate_judgement` uses it for `recall@k`).

Why not one count: several chunks can overlap one excerpt and one chunk several excerpts, so
"relevant chunks retrieved / gold excerpts" can exceed 1 (and nDCG with an ideal of one grade per
excerpt can exceed 1), while chunk-level recall rewards a chunker that splits an excerpt into many
relevant chunks and ignores excerpts no chunk covers. Excerpt recall compares chunkers fairly.

Token-level precision, recall and IoU (Chroma's chunking study) are computed on character ranges,
which is exact and tokenizer-free: R = union of the top-k chunks' ranges (overlapping chunks
counted once), G = union of the gold excerpts; precision = |R∩G|/|R|, recall = |R∩G|/|G|,
IoU = |R∩G|/|R∪G|. (Chroma sums the retrieved chunks' lengths without taking their union, so
overlapping chunkers are penalized there for repeated text; here repeated text is counted once.)

A context budget in tokens turns into a per-query cutoff: the top chunks are taken in rank order
while their cumulative token count stays within the budget; the first chunk that would exceed it
and everything after are left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from retbench.chunking import ChunkSet, Span
from retbench.data import Qrels, Run
from retbench.metrics import ranking
from retbench.metrics.judging import GainMatrix, judge_qrels

if TYPE_CHECKING:
    from retbench.evaluation import Evaluation

__all__ = [
    "Anchor",
    "Judgement",
    "budget_cutoffs",
    "evaluate_judgement",
    "judge_anchors",
    "judge_cosine",
    "judge_documents",
    "judge_spans",
    "judge_text",
    "normalize_heading_path",
    "overlap_scores",
    "pool_documents",
]

NEVER = np.iinfo(np.int64).max
Groups = Mapping[str, Sequence[Sequence[int]]]


# -- ranked entries ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Entries:
    """Every ranked position of the judged queries: row (query), 0-based rank, index into the run."""

    rows: np.ndarray
    ranks: np.ndarray
    index: np.ndarray
    lengths: np.ndarray


def _entries(run: Run, qids: Sequence[str]) -> _Entries:
    pos = np.fromiter((run._pos.get(q, -1) for q in qids), dtype=np.int64, count=len(qids))
    run_len = np.diff(run.offsets)
    lengths = np.where(pos >= 0, run_len[np.maximum(pos, 0)] if len(run_len) else 0, 0).astype(np.int64)
    starts = np.where(pos >= 0, run.offsets[np.maximum(pos, 0)], 0)
    total = int(lengths.sum())
    rows = np.repeat(np.arange(len(qids), dtype=np.int64), lengths)
    before = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(qids) else np.zeros(0, np.int64)
    ranks = np.arange(total, dtype=np.int64) - np.repeat(before, lengths)
    index = np.repeat(starts, lengths) + ranks
    return _Entries(rows, ranks, index.astype(np.int64), lengths)


def _chunk_rows(run: Run, ent: _Entries, chunks: ChunkSet) -> np.ndarray:
    """ChunkSet row of each ranked entry; an id that is not a chunk of the set is an error."""
    pos = chunks.positions(run.doc_ids[ent.index].tolist())
    if (pos < 0).any():
        bad = run.doc_ids[ent.index][pos < 0][0]
        raise ValueError(f"run {run.name!r} ranks {bad!r}, which is not a chunk of this chunk set")
    return pos


def _pad(items: Sequence[Sequence[object]], fill: object, dtype: object) -> np.ndarray:
    """Ragged per-query lists as a [n_queries, max_items] array filled with `fill`."""
    width = max((len(x) for x in items), default=0)
    out = np.full((len(items), width), fill, dtype=dtype)
    for i, row in enumerate(items):
        if len(row):
            out[i, : len(row)] = row
    return out


def _block_pairs(n_pool: int, n_items: int, test: Callable[[slice], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All (pool element, gold item) pairs where `test(items)` ([n_pool, block] bool) holds.

    Gold items are taken in blocks so memory stays near 4M cells whatever the collection size.
    """
    block = max(1, 4_000_000 // max(n_pool, 1))
    pool_idx, item_idx = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for start in range(0, n_items, block):
        p, t = np.nonzero(test(slice(start, min(start + block, n_items))))
        pool_idx.append(p)
        item_idx.append(t + start)
    return np.concatenate(pool_idx), np.concatenate(item_idx)


def _pool_counts(n: int, item_rows: np.ndarray, pair_items: np.ndarray, pair_pool: np.ndarray, pool_size: int) -> np.ndarray:
    """Per query, how many distinct pool elements (chunks of the collection) match one of its items."""
    size = max(pool_size, 1)
    keys = np.unique(item_rows[pair_items].astype(np.int64) * size + pair_pool)
    return np.bincount(keys // size, minlength=n).astype(np.int64)


# -- the judgement ----------------------------------------------------------------------------------
class Judgement:
    """A judge's verdict: the gain matrix plus, per gold item, the first rank that matched it."""

    def __init__(
        self,
        query_ids: Sequence[str],
        ent: _Entries,
        match: np.ndarray,
        n_items: np.ndarray,
        pool: np.ndarray | None = None,
        groups: list[list[list[int]]] | None = None,
    ) -> None:
        n = len(query_ids)
        n_items = np.asarray(n_items, dtype=np.int64)
        width = match.shape[1] if match.ndim == 2 else 0
        hit = match.any(axis=1) if width else np.zeros(len(ent.rows), dtype=bool)
        # relevant chunks in the collection; never fewer than were retrieved (ranked ids outside the pool)
        found = np.bincount(ent.rows[hit], minlength=n)
        self.n_relevant_chunks = np.maximum(found, n_items if pool is None else np.asarray(pool, dtype=np.int64))
        ideal_offsets = np.concatenate([[0], np.cumsum(self.n_relevant_chunks)]).astype(np.int64)
        self.gains = GainMatrix.from_hits(
            list(query_ids), ent.rows[hit], ent.ranks[hit], np.ones(int(hit.sum())), ent.lengths,
            ideal_offsets, np.ones(int(ideal_offsets[-1])),
        )
        self.n_items = n_items
        self.first_rank = np.full((n, max(width, int(n_items.max(initial=0)))), NEVER, dtype=np.int64)
        e, g = np.nonzero(match)
        np.minimum.at(self.first_rank, (ent.rows[e], g), ent.ranks[e])
        # one group per item unless the gold says which items stand in for each other
        self.groups = groups or [[[j] for j in range(int(c))] for c in n_items]

    @property
    def query_ids(self) -> list[str]:
        return self.gains.query_ids

    def __len__(self) -> int:
        return len(self.gains)

    def cutoffs(self, k: int | np.ndarray | None) -> np.ndarray | None:
        """A per-query cutoff array from an int (same k for all), an array, or None (uncut)."""
        if k is None:
            return None
        if np.isscalar(k):
            return np.full(len(self), int(k), dtype=np.int64)
        return np.asarray(k, dtype=np.int64)

    def _found(self, k: int | np.ndarray | None) -> np.ndarray:
        kk = self.cutoffs(k)
        limit = np.full(len(self), NEVER - 1, dtype=np.int64) if kk is None else kk
        return self.first_rank < limit[:, None]

    def recall(self, k: int | np.ndarray | None = None) -> np.ndarray:
        """Share of each query's gold items matched by some top-k chunk (0 with no items)."""
        found = self._found(k).sum(axis=1).astype(np.float64)
        return np.divide(found, self.n_items, out=np.zeros(len(self)), where=self.n_items > 0)

    def recall_any(self, k: int | np.ndarray | None = None) -> np.ndarray:
        """1 when some gold item is matched in the top k (seed 002's recall_any)."""
        return self._found(k).any(axis=1).astype(np.float64)

    def recall_all(self, k: int | np.ndarray | None = None) -> np.ndarray:
        """1 when every support group has a matched item in the top k (seed 002's recall_all).

        Groups list item indexes that stand in for one another; without groups every item is
        required. A query without gold items scores 0.
        """
        found = self._found(k)
        out = np.zeros(len(self))
        for i, groups in enumerate(self.groups):  # groups are few and small: one pass per query
            out[i] = float(bool(groups) and all(found[i, g].any() for g in groups if g))
        return out

    def precision(self, k: int | np.ndarray) -> np.ndarray:
        """Relevant chunks in the top k / k."""
        return ranking.precision(self.gains, self.cutoffs(k))

    def f1(self, k: int | np.ndarray) -> np.ndarray:
        """Harmonic mean of `precision` and item `recall` at k (seed 004's F1@k)."""
        p, r = self.precision(k), self.recall(k)
        return np.divide(2 * p * r, p + r, out=np.zeros(len(self)), where=(p + r) > 0)

    def mrr(self, k: int | np.ndarray | None = None) -> np.ndarray:
        """1 / rank of the first relevant chunk (0 when none in the top k)."""
        return ranking.reciprocal_rank(self.gains, self.cutoffs(k))


# metrics that count gold items rather than relevant chunks (see the module docstring)
ITEM_METRICS = ("recall", "recall_any", "recall_all", "f1")


def evaluate_judgement(
    judgement: Judgement,
    run: Run,
    metrics: Sequence[str],
    *,
    default_k: int = 5,
    system: str | None = None,
) -> Evaluation:
    """Any registry metric over a judge's verdict, as the same `Evaluation` that `evaluate` returns.

    recall, recall_any, recall_all and f1 count gold items (`Judgement`); every other metric is the
    registry's own function of the gain matrix. Queries without gold items are skipped (listed);
    a query the system failed or did not answer scores 0 and is counted, as in `evaluate`.
    """
    from retbench.data import QueryStatus
    from retbench.evaluation import Evaluation
    from retbench.metrics.registry import MetricContext, parse_metrics

    specs = parse_metrics(list(metrics), default_k)
    qids = judgement.query_ids
    keep = np.flatnonzero(judgement.n_items > 0)
    run_rows = np.fromiter((run._pos.get(q, -1) for q in qids), dtype=np.int64, count=len(qids))
    ctx = MetricContext(judgement.gains, 1, run, run_rows)
    values = np.empty((len(qids), len(specs)))
    for j, spec in enumerate(specs):
        if spec.metric.name in ITEM_METRICS:
            values[:, j] = getattr(judgement, spec.metric.name)(spec.ks(None, len(qids)))
        else:
            values[:, j] = spec.compute(ctx)
    status = [run.status[q].value if q in run else "missing" for q in qids]
    failed = np.array([s == "missing" or QueryStatus(s).failed for s in status], dtype=bool)
    values[failed] = 0.0
    judged = set(qids)
    return Evaluation(
        system=system if system is not None else run.name,
        metrics=[s.name for s in specs],
        query_ids=[qids[i] for i in keep],
        values=values[keep],
        status=[status[i] for i in keep],
        skipped=[q for q, n in zip(qids, judgement.n_items, strict=True) if n == 0],
        n_duplicates=run.n_duplicates,
        unjudged=[q for q in run.query_ids if q not in judged],
        default_k=default_k,
        trec_names=[None] * len(specs),
    )


def _check_groups(qids: Sequence[str], n_items: Sequence[int], groups: Groups | None) -> list[list[list[int]]] | None:
    if groups is None:
        return None
    out: list[list[list[int]]] = []
    for q, n in zip(qids, n_items, strict=True):
        qg = [list(g) for g in groups.get(q, [])] or [[j] for j in range(n)]
        for g in qg:
            for j in g:
                if not 0 <= j < n:
                    raise ValueError(f"support group of query {q!r} names item {j}, but it has {n} gold items")
        out.append(qg)
    return out


# -- spans ------------------------------------------------------------------------------------------
def _gold_spans(gold: Mapping[str, Sequence[Span]], qids: Sequence[str], chunks: ChunkSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Padded [n_q, G] document row (-1 = no item), start and end of each gold span."""
    doc_pos = {d: i for i, d in enumerate(chunks.doc_ids)}
    docs: list[list[int]] = []
    for q in qids:
        row = []
        for s in gold.get(q, ()):
            if s.doc_id not in doc_pos:
                raise ValueError(f"gold span of query {q!r} is in document {s.doc_id!r}, which the chunk set does not hold")
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
    return Judgement(qids, ent, match, n_items, pool, _check_groups(qids, n_items, groups))


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
    kk = np.full(n, NEVER, np.int64) if k is None else (np.full(n, int(k), np.int64) if np.isscalar(k) else np.asarray(k, np.int64))
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
    union = per_query(np.concatenate([r_grp, g_grp]), np.concatenate([r_s, gs[gi, gj]]), np.concatenate([r_e, ge[gi, gj]]))
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
def pool_documents(run: Run, chunks: ChunkSet | Mapping[str, str]) -> Run:
    """A document run from a chunk run: each document at the rank of its first (best) chunk."""
    if isinstance(chunks, ChunkSet):
        doc_of = np.asarray(chunks.chunk_doc_ids, dtype=object)
        pos = chunks.positions(run.doc_ids.tolist())
        if (pos < 0).any():
            raise ValueError(f"run {run.name!r} ranks {run.doc_ids[pos < 0][0]!r}, which is not a chunk of this chunk set")
        docs = doc_of[pos] if len(pos) else np.zeros(0, dtype=object)
    else:
        docs = np.asarray([chunks[c] for c in run.doc_ids], dtype=object)
    # Run keeps the first occurrence of a repeated id: in a sorted run that is the best chunk
    return Run(run.query_ids, run.offsets, docs, run.scores, status=run.status, latency=run.latency, errors=run.errors, name=run.name)


def judge_documents(run: Run, chunks: ChunkSet | Mapping[str, str], qrels: Qrels | Mapping[str, Mapping[str, int]]) -> GainMatrix:
    """Document-level qrels (e.g. BEIR) applied to a chunk run by max-pooling chunks to documents."""
    return judge_qrels(pool_documents(run, chunks), qrels)


# -- anchors ----------------------------------------------------------------------------------------
_DELIMS = re.compile(r"\s*[>›»]\s*")


def normalize_heading_path(path: str | Sequence[str]) -> tuple[str, ...]:
    """Heading path parts, whitespace collapsed and markup (`#`, `=`) stripped; `A>B`, `A › B` -> (A, B)."""
    parts = _DELIMS.split(path) if isinstance(path, str) else list(path)
    out = []
    for p in parts:
        p = " ".join(p.strip().strip("#=").split())
        if p:
            out.append(p)
    return tuple(out)


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
    """Anchor relevance (seed 002): same rel_path, heading-path prefix, and snippet when given.

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
        len(qids), np.asarray(item_row, dtype=np.int64), np.asarray(pair_item, dtype=np.int64),
        np.asarray(pair_chunk, dtype=np.int64), len(chunks),
    )
    return Judgement(qids, ent, match, n_items, pool, _check_groups(qids, n_items, groups))


# -- exact text and cosine ------------------------------------------------------------------------
def judge_text(
    run: Run,
    texts: ChunkSet | Mapping[str, str],
    gold: Mapping[str, Sequence[str]],
    *,
    collapse_whitespace: bool = False,
    groups: Groups | None = None,
) -> Judgement:
    """Exact-match relevance (seed 004): the ranked chunk's text equals a gold text, edges stripped."""

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


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def judge_cosine(
    run: Run,
    vectors: tuple[Sequence[str], np.ndarray],
    gold: Mapping[str, np.ndarray],
    *,
    threshold: float = 0.8,
    groups: Groups | None = None,
) -> Judgement:
    """Similarity relevance (seed 004): cosine(chunk embedding, a gold embedding) >= threshold.

    `vectors` is (chunk ids, matrix) for every ranked chunk, ideally for every chunk of the
    collection (the pool that the GainMatrix's relevant count is taken over); `gold` maps a query to a
    [n_gold, dim] matrix (gold chunks or excerpts embedded with the same model). Vectors need not
    be normalized; the comparison allows float32 rounding (1e-6) so a cosine of exactly the
    threshold counts.
    """
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"cosine threshold must be in [-1, 1], got {threshold}")
    ids, mat = vectors
    row_of = {c: i for i, c in enumerate(ids)}
    qids = list(gold)
    ent = _entries(run, qids)
    ranked = run.doc_ids[ent.index].tolist()
    missing = [c for c in ranked if c not in row_of]
    if missing:
        raise ValueError(f"no embedding for ranked chunk {missing[0]!r}")
    emb = _unit(np.asarray(mat))[np.fromiter((row_of[c] for c in ranked), dtype=np.int64, count=len(ranked))]
    dim = emb.shape[1] if emb.ndim == 2 else 0
    n_items = np.asarray([len(gold[q]) for q in qids], dtype=np.int64)
    width = int(n_items.max(initial=0))
    gpad = np.zeros((len(qids), width, dim), dtype=np.float32)
    for i, q in enumerate(qids):
        if n_items[i]:
            gpad[i, : n_items[i]] = _unit(np.asarray(gold[q]).reshape(n_items[i], -1))
    sims = np.einsum("nd,ngd->ng", emb, gpad[ent.rows]) if len(ranked) else np.zeros((0, width))
    valid = np.arange(width)[None, :] < n_items[ent.rows][:, None]
    match = (sims >= threshold - 1e-6) & valid
    # pool: every given vector against every gold vector
    every = _unit(np.asarray(mat))
    gi, gj = np.nonzero(np.arange(width)[None, :] < n_items[:, None])
    items = gpad[gi, gj]
    pp, pt = _block_pairs(len(every), len(gi), lambda b: every @ items[b].T >= threshold - 1e-6)
    pool = _pool_counts(len(qids), gi, pt, pp, len(every))
    return Judgement(qids, ent, match, n_items, pool, _check_groups(qids, n_items, groups))
