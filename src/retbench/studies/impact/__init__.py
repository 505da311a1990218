"""Ingestion impact: is this document worth ingesting, and what does it change?

Per candidate document d and knowledge base K (seed 003; README "Ingestion impact"):

    Novelty(d, K)      = 1 - max_{c in chunks(d), c' in chunks(K)} cos(c, c')
                         (per chunk: 1 - max_{c'} cos(c, c'); per document: min and mean over d's chunks,
                         with the nearest existing chunk and document; min is the seed's definition)
    dM(d, K)           = M(K + {d}) - M(K)   for M in recall@k, nDCG@k, MRR@k (means over the evaluation queries)
    dContextRecall     = CR(K + {d}) - CR(K); CR(q) = share of q's reference sentences whose best cosine to a
                         sentence of the top-`context_k` retrieved documents is >= threshold (no LLM)
    Gain(d, K)         = alpha * dRecall@k + beta * dContextRecall + gamma * Novelty(d, K)

Modes: `alone` (each candidate against K), `sequential` (cumulative, in a given order: each candidate
against K plus the candidates before it) and `leave_one_out` (documents already in K: M(K) - M(K - {d}),
novelty against K without d).

Speed. Nothing is re-indexed. With a dense exact (FAISS flat inner product) retriever, K's per-query
top-(depth+1) lists are searched once; a candidate changes query q's top-depth iff its score beats q's
depth-th entry in trec_eval order (score descending, then doc id descending), so "alone" for every
candidate is one queries x candidates matrix product plus per-query thresholds, and the new lists are
merges: exact, equal doc for doc to a from-scratch FAISS flat rebuild (tests/test_ingest.py). Metrics
of the changed rows go through the metric engine (`judge_qrels`, registry metrics on a GainMatrix).
Any other retriever (BM25, hybrid, stores) goes through `RebuildImpact`: `add`, re-run every query,
evaluate, `delete` (for BM25 a full rebuild, measured in benchmarks/ingest_speed.py).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from retbench.data import Corpus, Dataset, Qrels, Queries, Run
from retbench.errors import ConfigError, InputError
from retbench.metrics.judges import GainMatrix, judge_qrels
from retbench.metrics.registry import MetricContext, MetricSpec, parse_metrics
from retbench.report.markdown import md_table

MODES = ("alone", "sequential", "leave_one_out")
STATUSES = ("new", "present", "duplicate")
# registry metrics that are pure functions of the gain matrix (so changed rows can be re-scored alone)
RANK_METRICS = frozenset({"hit", "recall", "P", "f1", "mrr", "map", "ndcg", "ndcg_exp", "hybrid"})
_TIE_MARGIN = 8  # extra neighbours fetched so a tie straddling the cut is seen and resolved


# -- small helpers ---------------------------------------------------------------------------------
def text_hash(text: str) -> str:
    """Identity of a document's indexed text (exact duplicates under another id share it)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def split_sentences(text: str) -> list[str]:
    """Sentences of a text, by the chunking module's rule (. ! ? followed by space, and newlines)."""
    from retbench.chunkers import sentence_spans

    return [text[a:b] for a, b in sentence_spans(text)]


def _normalize_rows(x: np.ndarray) -> np.ndarray:
    """L2-normalized float32 rows: cosine is then an inner product whatever the encoder did."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def concat_corpora(a: Corpus, b: Corpus) -> Corpus:
    """K + extra documents as one corpus (a's join rule)."""
    return Corpus(
        [*a.ids, *b.ids],
        [*a.texts, *b.texts],
        [a.title(i) for i in range(len(a))] + [b.title(i) for i in range(len(b))],
        None,
        join_rule=a.join_rule,
        name=a.name,
    )


def near_duplicate(text: str, rng: random.Random, edits: int = 3) -> str:
    """A light edit of a text: `edits` seeded operations, each a swap of two adjacent words, a word deleted,
    or a word's case flipped. Used to make near-duplicates that should be recognized as not novel."""
    words = text.split(" ")
    for _ in range(edits):
        if len(words) < 3:
            break
        op = rng.choice(("swap", "delete", "case"))
        i = rng.randrange(len(words) - 1)
        if op == "swap":
            words[i], words[i + 1] = words[i + 1], words[i]
        elif op == "delete":
            del words[i]
        else:
            w = words[i]
            words[i] = w.lower() if w != w.lower() else w.upper()
    return " ".join(words)


def rank_specs(metrics: Sequence[str], *, field_name: str = "metrics") -> list[MetricSpec]:
    """Parse metric names for ingestion: rank metrics of the gain matrix, each with a cutoff (@k)."""
    specs = parse_metrics(list(metrics))
    if not specs:
        raise ConfigError("list at least one metric", field=field_name)
    for s in specs:
        if s.metric.name not in RANK_METRICS:
            raise ConfigError(
                f"metric {s.name!r} is not a rank metric of the gain matrix; use {', '.join(sorted(RANK_METRICS))}",
                field=field_name,
            )
        if s.k is None:
            raise ConfigError(
                f"metric {s.name!r} needs a cutoff here (e.g. {s.metric.name}@10): only top-k lists are kept",
                field=field_name,
            )
    return specs


# -- novelty ---------------------------------------------------------------------------------------
@dataclass
class Novelty:
    """How new a document is: per chunk 1 - best cosine to K's chunks, aggregated by min and mean."""

    min: float
    mean: float
    max_cos: float
    nearest_doc: str | None
    nearest_chunk: str | None
    chunks: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ChunkTable:
    """Chunks of some documents as columns: ids, owning document row, offsets in the document, texts."""

    ids: list[str]
    doc_rows: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    texts: list[str]


def chunk_table(corpus: Corpus, chunker: Any = None) -> ChunkTable:
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

    def __init__(self, encoder: Any, chunker: Any = None) -> None:
        self.encoder = encoder
        self.chunker = chunker
        self._index: Any = None
        self._chunk_ids: list[str] = []
        self._chunk_docs: list[str] = []
        self._doc_chunks: dict[str, int] = {}

    def describe(self) -> dict[str, Any]:
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
        return table, _normalize_rows(self.encoder.encode_documents(table.texts))

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

    def _nearest(self, vecs: np.ndarray, exclude: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
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
        best, lab = self._nearest(vecs, doc_of_chunk if leave_one_out else [None] * len(vecs))
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


# -- context recall without an LLM ------------------------------------------------------------------
class SentenceSupport(Protocol):
    """Decides which reference sentences one context document supports (an LLM judge can implement this)."""

    def support(self, references: Sequence[str], text: str) -> np.ndarray:
        """Boolean per reference sentence: does `text` support it?"""
        ...


class CosineSupport:
    """A reference sentence is supported by a document when some sentence of it has cosine >= threshold."""

    def __init__(self, encoder: Any, threshold: float = 0.8) -> None:
        if not -1.0 <= threshold <= 1.0:
            raise ConfigError(f"threshold must be a cosine in [-1, 1], got {threshold!r}", field="threshold")
        self.encoder = encoder
        self.threshold = float(threshold)
        self._vecs: dict[str, np.ndarray] = {}

    def describe(self) -> dict[str, Any]:
        return {"judge": "cosine", "threshold": self.threshold, "split": "sentences (chunking.sentence_spans)"}

    def prepare(self, texts: Sequence[str]) -> None:
        """Encode the sentences of many texts in one call (the Encoder caches them on disk)."""
        todo = list(dict.fromkeys(s for t in texts for s in split_sentences(t) if s not in self._vecs))
        if todo:
            vecs = _normalize_rows(self.encoder.encode_documents(todo))
            self._vecs.update(zip(todo, vecs, strict=True))

    def _matrix(self, sentences: Sequence[str]) -> np.ndarray:
        self.prepare(sentences)
        return np.stack([self._vecs[s] for s in sentences])

    def support(self, references: Sequence[str], text: str) -> np.ndarray:
        sents = split_sentences(text)
        if not references or not sents:
            return np.zeros(len(references), dtype=bool)
        sims = self._matrix(references) @ self._matrix(sents).T
        return sims.max(axis=1) >= self.threshold


class ContextRecall:
    """Context recall against reference answers, decomposed per context document.

    CR(q, context) = share of q's reference sentences supported by at least one context document, where
    `support` says which sentences one document supports (cosine by default). Support is cached per
    (query, document), so a changed context costs only its new documents.
    """

    def __init__(
        self,
        references: Mapping[str, str | Sequence[str]],
        texts: Callable[[str], str],
        support: SentenceSupport,
        context_k: int = 5,
    ) -> None:
        if context_k < 1:
            raise ConfigError("context_k must be >= 1", field="context_k")
        self.references: dict[str, list[str]] = {}
        for q, ref in references.items():
            sents = split_sentences(ref) if isinstance(ref, str) else [s for r in ref for s in split_sentences(r)]
            if sents:
                self.references[str(q)] = sents
        self.texts = texts
        self.judge = support
        self.context_k = int(context_k)
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def has(self, qid: str) -> bool:
        return qid in self.references

    def prepare(self, doc_ids: Sequence[str]) -> None:
        """Batch-encode what many documents (and all references) need, when the judge can."""
        prep = getattr(self.judge, "prepare", None)
        if callable(prep):
            prep([*(s for r in self.references.values() for s in r), *(self.texts(d) for d in dict.fromkeys(doc_ids))])

    def supported(self, qid: str, doc_id: str) -> np.ndarray:
        key = (qid, doc_id)
        hit = self._cache.get(key)
        if hit is None:
            hit = np.asarray(self.judge.support(self.references[qid], self.texts(doc_id)), dtype=bool)
            self._cache[key] = hit
        return hit

    def score(self, qid: str, doc_ids: Sequence[str]) -> float:
        """CR of one query for a context (its first `context_k` documents); NaN without references."""
        refs = self.references.get(qid)
        if refs is None:
            return float("nan")
        covered = np.zeros(len(refs), dtype=bool)
        for d in list(doc_ids)[: self.context_k]:
            covered |= self.supported(qid, d)
        return float(covered.mean())

    def scores(self, qids: Sequence[str], contexts: Sequence[Sequence[str]]) -> np.ndarray:
        self.prepare(
            [d for q, ctx in zip(qids, contexts, strict=True) if self.has(q) for d in list(ctx)[: self.context_k]]
        )
        return np.array([self.score(q, ctx) for q, ctx in zip(qids, contexts, strict=True)], dtype=np.float64)


# -- impact records ---------------------------------------------------------------------------------
@dataclass
class Impact:
    """What one candidate changes (or, in leave-one-out, what one present document contributes)."""

    doc_id: str
    mode: str
    group: str = ""
    status: str = "new"
    duplicate_of: str | None = None
    deltas: dict[str, float] = field(default_factory=dict)
    d_context_recall: float | None = None
    own_queries: list[str] = field(default_factory=list)
    own_deltas: dict[str, float] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    gained: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    novelty: Novelty | None = None
    gain: float = 0.0
    after: dict[str, float] | None = None  # sequential: metric means once this document is in

    def to_dict(self, *, chunks: bool = True) -> dict[str, Any]:
        out = asdict(self)
        if self.novelty is not None and not chunks:
            out["novelty"].pop("chunks", None)
        return out


@dataclass
class GainWeights:
    """Gain = alpha * d<recall metric> + beta * dContextRecall + gamma * Novelty(min or mean)."""

    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 0.01
    recall: str = ""
    novelty: str = "min"

    def apply(self, impact: Impact) -> float:
        dr = impact.deltas.get(self.recall, 0.0)
        dc = (
            impact.d_context_recall
            if impact.d_context_recall is not None and np.isfinite(impact.d_context_recall)
            else 0.0
        )
        nov = getattr(impact.novelty, self.novelty) if impact.novelty is not None else 0.0
        impact.gain = float(self.alpha * dr + self.beta * dc + self.gamma * nov)
        return impact.gain


def _pair_gm(base: GainMatrix, rows: np.ndarray, gains: np.ndarray, lengths: np.ndarray) -> GainMatrix:
    """Gain matrix whose row i is base query rows[i] with new grades by rank `gains[i]`; ideal grades unchanged."""
    offs = base.ideal_offsets
    counts = offs[rows + 1] - offs[rows]
    new_offs = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=new_offs[1:])
    idx = np.repeat(offs[rows] - new_offs[:-1], counts) + np.arange(new_offs[-1], dtype=np.int64)
    hr, hk = np.nonzero(gains > 0)
    qids = [base.query_ids[r] for r in rows.tolist()]
    return GainMatrix.from_hits(qids, hr, hk, gains[hr, hk], lengths, new_offs, base.ideal_grades[idx])


class _Base:
    """What both engines share: evaluation queries, metrics, per-candidate aggregation."""

    def __init__(
        self,
        query_ids: Sequence[str],
        qrels: Qrels | Mapping[str, Mapping[str, int]],
        metrics: Sequence[str],
        relevance_level: int,
        context: ContextRecall | None,
        affected_by: str | None,
    ) -> None:
        self.specs = rank_specs(metrics)
        self.metric_names = [s.name for s in self.specs]
        self.level = int(relevance_level)
        self.qrels = qrels
        have = set(query_ids)
        judged = [q for q in qrels if q in have]
        # trec_eval's default: queries with no relevant document are skipped (and listed)
        self.qids = [q for q in judged if any(g >= self.level for g in qrels[q].values())]
        self.skipped = [q for q in judged if q not in set(self.qids)]
        if not self.qids:
            raise InputError("no evaluation query has a relevant document", field="qrels")
        self.row_of = {q: i for i, q in enumerate(self.qids)}
        self.n = len(self.qids)
        self.context = context
        self.context_k = context.context_k if context is not None else 0
        self.depth = max([s.k for s in self.specs if s.k is not None] + [self.context_k])
        self.width = self.depth + 1
        self.has_ref = np.array([context is not None and context.has(q) for q in self.qids], dtype=bool)
        names = self.metric_names
        if affected_by is None:
            affected_by = next((m for m in names if m.startswith("ndcg")), names[0])
        else:
            affected_by = parse_metrics([affected_by])[0].name
        if affected_by not in names:
            raise ConfigError(
                f"affected_by {affected_by!r} is not one of the metrics ({', '.join(names)})", field="affected_by"
            )
        self.affected = names.index(affected_by)
        # doc id -> [(row, grade)] of the evaluation queries that judge it relevant (own queries)
        self.judged_for: dict[str, list[tuple[int, float]]] = {}
        for i, q in enumerate(self.qids):
            for d, g in qrels[q].items():
                if g >= self.level:
                    self.judged_for.setdefault(d, []).append((i, float(g)))

    def _values(self, gm: GainMatrix) -> np.ndarray:
        ctx = MetricContext(gm, self.level)
        return np.column_stack([s.compute(ctx) for s in self.specs]) if len(gm) else np.zeros((0, len(self.specs)))

    def _collect(
        self,
        mode: str,
        ids: Sequence[str],
        qi: np.ndarray,
        ci: np.ndarray,
        delta: np.ndarray,
        dcr: np.ndarray,
        changed: np.ndarray,
    ) -> list[Impact]:
        """Per-candidate impacts from per-(query, candidate) deltas of the pairs that changed."""
        m = len(ids)
        sums = (
            np.stack([np.bincount(ci, weights=delta[:, j], minlength=m) for j in range(len(self.specs))], axis=1)
            / self.n
        )
        n_ref = int(self.has_ref.sum())
        ok = np.isfinite(dcr)
        cr = np.bincount(ci[ok], weights=dcr[ok], minlength=m) / n_ref if n_ref else None
        order = np.lexsort((qi, ci))
        qi, ci, delta, changed = qi[order], ci[order], delta[order], changed[order]
        bounds = np.searchsorted(ci, np.arange(m + 1))
        out = []
        for c, doc in enumerate(ids):
            a, b = bounds[c], bounds[c + 1]
            rows, d = qi[a:b], delta[a:b]
            eff = d[:, self.affected]
            imp = Impact(doc, mode)
            imp.deltas = {name: float(sums[c, j]) for j, name in enumerate(self.metric_names)}
            imp.d_context_recall = float(cr[c]) if cr is not None else None
            imp.changed = [self.qids[r] for r in rows[changed[a:b]].tolist()]
            imp.gained = [self.qids[r] for r in rows[eff > 0].tolist()]
            imp.lost = [self.qids[r] for r in rows[eff < 0].tolist()]
            own = self.judged_for.get(doc, [])
            if own:
                own_rows = np.array([r for r, _ in own], dtype=np.int64)
                hit = np.isin(rows, own_rows)
                imp.own_queries = [self.qids[r] for r in own_rows.tolist()]
                imp.own_deltas = {
                    name: float(d[hit, j].sum() / len(own_rows)) for j, name in enumerate(self.metric_names)
                }
            out.append(imp)
        return out

    def _cat(self, parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        if not parts:
            m = len(self.specs)
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, m)), np.zeros(0), np.zeros(0, bool)
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(5))

    def _grades(self, rows: np.ndarray, doc_ids: Sequence[str]) -> np.ndarray:
        out = np.zeros(len(rows), dtype=np.float64)
        for i, (r, d) in enumerate(zip(rows.tolist(), doc_ids, strict=True)):
            g = self.qrels[self.qids[r]].get(d, 0)
            out[i] = g if g > 0 else 0.0
        return out


# -- the exact incremental engine (dense, flat inner product) -----------------------------------------
@dataclass
class _State:
    pos: np.ndarray  # int64 [n, width] doc positions in trec_eval order, -1 padding
    score: np.ndarray  # float32 [n, width], -inf padding
    gains: np.ndarray  # float64 [n, width] grade of each ranked doc
    lengths: np.ndarray  # int64 [n] valid entries per row
    values: np.ndarray  # float64 [n, n_metrics] metric values per query
    cr: np.ndarray  # float64 [n] context recall per query (NaN without references)

    def copy(self) -> _State:
        return _State(*(np.array(getattr(self, f)) for f in ("pos", "score", "gains", "lengths", "values", "cr")))


Search = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise float32 inner products, one fixed summation per pair: the same two vectors always give the same
    score, however they were batched (matrix products may round the last bit differently per call)."""
    return np.multiply(a, b, dtype=np.float32).sum(axis=-1, dtype=np.float32)


def _slack(kth: np.ndarray) -> np.ndarray:
    """Margin of the fast matrix-product screen: far above float32 rounding of a 1,000-dim inner product."""
    return np.where(np.isfinite(kth), 1e-4 * np.maximum(1.0, np.abs(kth)), 0.0)


class DenseImpact(_Base):
    """Exact impact of adding or removing documents for a dense exact inner-product retriever, without re-indexing.

    `search(query_vectors, n)` gives the exact top-n (doc ids, scores) of K, e.g. a flat DenseRetriever's
    `search_embeddings`; without it a FAISS IndexFlatIP is built over `kb_vectors`. With `kb_vectors`, every
    score (K's and the candidates') is recomputed by one per-pair float32 function, so a candidate whose vector
    equals a K document's (a near-duplicate whose edits the model does not see) ties with it exactly and the
    tie goes by doc id as in trec_eval. Distinct vectors whose scores differ by float32 rounding alone
    (~1e-7) are the only pairs a rebuilt index could order the other way.
    """

    engine = "dense exact incremental (top-k merge)"

    def __init__(
        self,
        kb_ids: Sequence[str],
        query_ids: Sequence[str],
        query_vectors: np.ndarray,
        qrels: Qrels | Mapping[str, Mapping[str, int]],
        metrics: Sequence[str],
        *,
        search: Search | None = None,
        kb_vectors: np.ndarray | None = None,
        relevance_level: int = 1,
        context: ContextRecall | None = None,
        affected_by: str | None = None,
    ) -> None:
        super().__init__(query_ids, qrels, metrics, relevance_level, context, affected_by)
        qpos = {str(q): i for i, q in enumerate(query_ids)}
        self.Q = np.ascontiguousarray(np.asarray(query_vectors, dtype=np.float32)[[qpos[q] for q in self.qids]])
        self.ids: list[str] = [str(d) for d in kb_ids]
        if len(set(self.ids)) != len(self.ids):
            raise InputError("knowledge base repeats a document id", field="ids")
        self.pos_of = {d: i for i, d in enumerate(self.ids)}
        self.n_kb = len(self.ids)
        self.X = None if kb_vectors is None else np.ascontiguousarray(kb_vectors, dtype=np.float32)
        if search is None:
            if self.X is None:
                raise ValueError("give either search or kb_vectors")
            search = self._flat_search(self.X)
        self.base = self._initial_state(search)

    def _flat_search(self, vectors: np.ndarray) -> Search:
        import faiss

        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(np.ascontiguousarray(vectors))
        table = np.asarray([*self.ids, None], dtype=object)

        def search(q: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
            scores, labels = index.search(q, n)
            return table[np.where(labels < 0, len(self.ids), labels)], np.where(labels < 0, -np.inf, scores).astype(
                np.float32
            )

        return search

    # -- state ---------------------------------------------------------------------------------------
    def _initial_state(self, search: Search) -> _State:
        n_docs = self.n_kb
        want = min(self.width + _TIE_MARGIN, n_docs)
        rows = np.arange(self.n)
        pos = np.full((self.n, want), -1, dtype=np.int64)
        score = np.full((self.n, want), -np.inf, dtype=np.float32)
        while len(rows):
            ids, sc = search(self.Q[rows], want)
            p = np.array(
                [[self.pos_of[d] if d is not None else -1 for d in r] for r in ids.tolist()], dtype=np.int64
            ).reshape(len(rows), -1)
            if p.shape[1] < pos.shape[1]:
                pad = pos.shape[1] - p.shape[1]
                p = np.pad(p, ((0, 0), (0, pad)), constant_values=-1)
                sc = np.pad(sc, ((0, 0), (0, pad)), constant_values=-np.inf)
            if p.shape[1] > pos.shape[1]:
                pos = np.pad(pos, ((0, 0), (0, p.shape[1] - pos.shape[1])), constant_values=-1)
                score = np.pad(score, ((0, 0), (0, p.shape[1] - score.shape[1])), constant_values=-np.inf)
            pos[rows], score[rows] = p, sc
            # a tie running past the last fetched neighbour might hide a doc id that wins the tie: fetch deeper
            k_in = min(self.width, want)
            tied = (
                np.isfinite(sc[:, -1]) & (sc[:, k_in - 1] == sc[:, -1]) if want < n_docs else np.zeros(len(rows), bool)
            )
            rows = rows[tied]
            want = min(want * 2, n_docs)
        if self.X is not None:  # one scoring function for K and candidates: identical vectors tie exactly
            live = pos >= 0
            score = np.where(live, _dot(self.Q[:, None, :], self.X[np.maximum(pos, 0)]), -np.inf).astype(np.float32)
        rank = self._id_rank(pos)
        order = np.lexsort((-rank, -score.astype(np.float64)), axis=-1)[:, : self.width]
        pos = np.take_along_axis(pos, order, axis=1)
        score = np.take_along_axis(score, order, axis=1)
        if pos.shape[1] < self.width:
            pad = self.width - pos.shape[1]
            pos = np.pad(pos, ((0, 0), (0, pad)), constant_values=-1)
            score = np.pad(score, ((0, 0), (0, pad)), constant_values=-np.inf)
        lengths = (pos >= 0).sum(axis=1).astype(np.int64)
        run = self._run(pos, score, lengths)
        gm = judge_qrels(run, self.qrels, self.qids)
        gains = np.zeros((self.n, self.width), dtype=np.float64)
        dense = gm.gains
        gains[:, : dense.shape[1]] = dense[:, : self.width]
        self.gm = gm
        values = self._values(gm)
        cr = np.full(self.n, np.nan)
        if self.context is not None:
            cr = self.context.scores(
                self.qids, [self._row_ids(pos[i], lengths[i], self.context_k) for i in range(self.n)]
            )
        return _State(pos, score, gains, lengths, values, cr)

    def _id_rank(self, pos: np.ndarray) -> np.ndarray:
        """Rank of each doc id in string order (trec_eval's tie-break), -1 for padding."""
        ids = np.asarray(self.ids, dtype=object)
        uniq = np.unique(pos[pos >= 0])
        order = np.argsort(ids[uniq].astype(str), kind="stable")
        rank_of = np.full(len(self.ids), -1, dtype=np.int64)
        rank_of[uniq[order]] = np.arange(len(uniq))
        return np.where(pos >= 0, rank_of[np.maximum(pos, 0)], -1)

    def _row_ids(self, pos_row: np.ndarray, length: int, k: int) -> list[str]:
        return [self.ids[p] for p in pos_row[: min(length, k)].tolist()]

    def _run(
        self, pos: np.ndarray, score: np.ndarray, lengths: np.ndarray, depth: int | None = None, name: str = ""
    ) -> Run:
        lens = np.minimum(lengths, depth if depth is not None else pos.shape[1])
        mask = np.arange(pos.shape[1])[None, :] < lens[:, None]
        ids = np.asarray(self.ids, dtype=object)[pos[mask]]
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        return Run(list(self.qids), offsets, ids, score[mask].astype(np.float64), name=name)

    def run(self, state: _State | None = None, name: str = "K") -> Run:
        """The top-`depth` run of a state (default: K)."""
        s = state or self.base
        return self._run(s.pos, s.score, s.lengths, self.depth, name)

    @property
    def before(self) -> dict[str, float]:
        """Metric means over the evaluation queries with K (and context recall, when configured)."""
        out = {m: float(self.base.values[:, j].mean()) for j, m in enumerate(self.metric_names)}
        if self.context is not None and self.has_ref.any():
            out["context_recall"] = float(np.nanmean(self.base.cr[self.has_ref]))
        return out

    # -- insertion -----------------------------------------------------------------------------------
    def _positions(self, st: _State, qi: np.ndarray, s: np.ndarray, cid: Sequence[str]) -> np.ndarray:
        """0-based rank a new doc would take in each row (trec_eval order: score desc, then doc id desc)."""
        row_scores = st.score[qi]
        p = (row_scores > s[:, None]).sum(axis=1)
        eq = row_scores == s[:, None]
        for r in np.flatnonzero(eq.any(axis=1)).tolist():
            for j in np.flatnonzero(eq[r]).tolist():
                if self.ids[st.pos[qi[r], j]] > cid[r]:
                    p[r] += 1
        return p

    def _insert(
        self, st: _State, qi: np.ndarray, p: np.ndarray, new_pos: np.ndarray, s: np.ndarray, g: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Rows with a new doc at rank p (everything below shifts down one; the last entry falls off)."""
        J = np.arange(self.width)[None, :]
        src = np.where(p[:, None] > J, J, J - 1).clip(0)
        at = p[:, None] == J
        pos = np.where(at, new_pos[:, None], st.pos[qi[:, None], src])
        score = np.where(at, s[:, None], st.score[qi[:, None], src])
        gains = np.where(at, g[:, None], st.gains[qi[:, None], src])
        lengths = np.minimum(st.lengths[qi] + 1, self.width)
        return pos, score.astype(np.float32), gains, lengths

    def _context_after(self, st: _State, qi: np.ndarray, p: np.ndarray, cid: Sequence[str]) -> np.ndarray:
        """Context recall of rows once a candidate is at rank p (NaN without references; old value if p >= context_k)."""
        out = st.cr[qi].copy()
        if self.context is None:
            return out
        k = self.context_k
        todo = np.flatnonzero(self.has_ref[qi] & (p < k))
        ctxs = []
        for t in todo.tolist():
            r = qi[t]
            old = self._row_ids(st.pos[r], int(st.lengths[r]), k)
            ctxs.append((t, [*old[: p[t]], cid[t], *old[p[t] :]][:k]))
        self.context.prepare([d for _, ctx in ctxs for d in ctx])
        for t, ctx in ctxs:
            out[t] = self.context.score(self.qids[qi[t]], ctx)
        return out

    def _pairs(
        self, st: _State, qi: np.ndarray, cid: list[str], s: np.ndarray, new_pos: np.ndarray, limit: int
    ) -> dict[str, Any]:
        """Evaluate the (row, candidate) pairs whose candidate enters the top `limit`."""
        p = self._positions(st, qi, s, cid)
        keep = p < limit
        qi, p, s, new_pos = qi[keep], p[keep], s[keep], new_pos[keep]
        cid = [c for c, k in zip(cid, keep.tolist(), strict=True) if k]
        g = self._grades(qi, cid)
        pos, score, gains, lengths = self._insert(st, qi, p, new_pos, s, g)
        after = self._values(_pair_gm(self.gm, qi, gains, lengths))
        cr = self._context_after(st, qi, p, cid)
        return {
            "qi": qi,
            "keep": keep,
            "p": p,
            "pos": pos,
            "score": score,
            "gains": gains,
            "lengths": lengths,
            "after": after,
            "cr": cr,
        }

    # -- modes -----------------------------------------------------------------------------------------
    def alone(
        self, cand_ids: Sequence[str], cand_vectors: np.ndarray, skip: Sequence[bool] | None = None
    ) -> list[Impact]:
        """Each candidate against K. `skip` marks no-op candidates (already present): their deltas are 0."""
        st = self.base
        cand_ids = [str(c) for c in cand_ids]
        C = np.ascontiguousarray(np.asarray(cand_vectors, dtype=np.float32).reshape(len(cand_ids), -1))
        kth = st.score[:, self.depth - 1]
        mask = (kth - _slack(kth))[:, None] <= self.Q @ C.T  # a fast screen; the pairs it passes are scored exactly
        mask[:, self._noop(cand_ids, skip)] = False
        qi, ci = np.nonzero(mask)
        s = _dot(self.Q[qi], C[ci])
        res = self._pairs(st, qi, [cand_ids[c] for c in ci.tolist()], s, np.full(len(qi), -1), self.depth)
        ci = ci[res["keep"]]
        delta = res["after"] - st.values[res["qi"]]
        dcr = res["cr"] - st.cr[res["qi"]]
        return self._collect("alone", cand_ids, res["qi"], ci, delta, dcr, np.ones(len(ci), dtype=bool))

    def _noop(self, cand_ids: Sequence[str], skip: Sequence[bool] | None) -> np.ndarray:
        """Candidates that change nothing: marked by the caller, or whose id is already in K (never counted twice)."""
        present = np.array([c in self.pos_of for c in cand_ids], dtype=bool)
        return present | np.asarray(skip, dtype=bool) if skip is not None else present

    def after_run(self, cand_ids: Sequence[str], cand_vectors: np.ndarray) -> Run:
        """The top-`depth` run of K plus these documents (added in order), by merges; for checks and reports."""
        st = self.base.copy()
        for c, v in zip(cand_ids, np.asarray(cand_vectors, dtype=np.float32).reshape(len(cand_ids), -1), strict=True):
            self._apply(st, str(c), v)
        return self.run(st, name="K+d")

    def _apply(self, st: _State, cid: str, vec: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
        """Ingest one document into a state (exact merge into every row it enters)."""
        kth = st.score[:, self.width - 1]
        qi = np.flatnonzero(self.Q @ vec >= kth - _slack(kth))
        s = _dot(self.Q[qi], np.broadcast_to(vec, (len(qi), len(vec))))
        new = len(self.ids)
        self.ids.append(cid)
        res = self._pairs(st, qi, [cid] * len(qi), s, np.full(len(qi), new), self.width)
        before = st.values[res["qi"]].copy(), st.cr[res["qi"]].copy()
        rows = res["qi"]
        st.pos[rows], st.score[rows], st.gains[rows], st.lengths[rows] = (
            res["pos"],
            res["score"],
            res["gains"],
            res["lengths"],
        )
        st.values[rows], st.cr[rows] = res["after"], res["cr"]
        return res, np.concatenate([before[0], before[1][:, None]], axis=1)

    def _forget(self, n_ids: int) -> None:
        """Drop doc ids appended by a sequential pass (the base state never refers to them)."""
        del self.ids[n_ids:]

    def sequential(
        self, cand_ids: Sequence[str], cand_vectors: np.ndarray, skip: Sequence[bool] | None = None
    ) -> list[Impact]:
        """Candidates ingested one after another: each against K plus the candidates before it (skipped ones stay out)."""
        st = self.base.copy()
        n_ids = len(self.ids)
        cand_ids = [str(c) for c in cand_ids]
        C = np.asarray(cand_vectors, dtype=np.float32).reshape(len(cand_ids), -1)
        skip = self._noop(cand_ids, skip)
        parts: list[tuple[np.ndarray, ...]] = []
        afters: list[dict[str, float]] = []
        m = len(self.specs)
        try:
            for c, cid in enumerate(cand_ids):
                if not skip[c]:
                    res, before = self._apply(st, cid, C[c])
                    parts.append(
                        (
                            res["qi"],
                            np.full(len(res["qi"]), c),
                            res["after"] - before[:, :m],
                            res["cr"] - before[:, m],
                            res["p"] < self.depth,
                        )
                    )
                afters.append(self._means(st))
        finally:
            self._forget(n_ids)
        out = self._collect("sequential", cand_ids, *self._cat(parts))
        for imp, a in zip(out, afters, strict=True):
            imp.after = a
        return out

    def _means(self, st: _State) -> dict[str, float]:
        out = {m: float(st.values[:, j].mean()) for j, m in enumerate(self.metric_names)}
        if self.context is not None and self.has_ref.any():
            out["context_recall"] = float(np.nanmean(st.cr[self.has_ref]))
        return out

    def leave_one_out(self, doc_ids: Sequence[str]) -> list[Impact]:
        """For documents in K: M(K) - M(K - {d}) (what each contributes); rows lose d and take up their next doc."""
        st = self.base
        doc_ids = [str(d) for d in doc_ids]
        missing = [d for d in doc_ids if d not in self.pos_of]
        if missing:
            raise InputError(
                f"leave-one-out documents not in the knowledge base: {', '.join(missing[:5])}", field="leave_one_out"
            )
        which = np.full(len(self.ids), -1, dtype=np.int64)
        which[[self.pos_of[d] for d in doc_ids]] = np.arange(len(doc_ids))
        hit = (st.pos[:, : self.depth] >= 0) & (which[np.maximum(st.pos[:, : self.depth], 0)] >= 0)
        qi, p = np.nonzero(hit)
        ci = which[st.pos[qi, p]]
        J = np.arange(self.width)[None, :]
        src = np.where(p[:, None] > J, J, J + 1)
        valid = src < self.width
        src = src.clip(max=self.width - 1)
        gains = np.where(valid, st.gains[qi[:, None], src], 0.0)
        lengths = st.lengths[qi] - 1
        after = self._values(_pair_gm(self.gm, qi, gains, lengths))
        cr = st.cr[qi].copy()
        if self.context is not None:
            k = self.context_k
            ctxs = []
            for t in np.flatnonzero(self.has_ref[qi] & (p < k)).tolist():
                ids = self._row_ids(st.pos[qi[t]], int(st.lengths[qi[t]]), k + 1)
                ctxs.append((t, [d for j, d in enumerate(ids) if j != p[t]][:k]))
            self.context.prepare([d for _, ctx in ctxs for d in ctx])
            for t, ctx in ctxs:
                cr[t] = self.context.score(self.qids[qi[t]], ctx)
        delta = st.values[qi] - after
        dcr = st.cr[qi] - cr
        return self._collect("leave_one_out", doc_ids, qi, ci, delta, dcr, np.ones(len(qi), dtype=bool))


# -- the generic engine: any retriever with add/delete ------------------------------------------------
class RebuildImpact(_Base):
    """Impact through any Retriever: add the document, re-run every query, evaluate, remove it again.

    Exact by construction and as slow as the retriever's `add` (BM25 adapters rebuild) plus a full search.
    `strategy="reindex"` builds the index from scratch over K + {d} instead (the naive reference).
    """

    def __init__(
        self,
        retriever: Any,
        kb: Corpus,
        queries: Queries,
        qrels: Qrels | Mapping[str, Mapping[str, int]],
        metrics: Sequence[str],
        *,
        relevance_level: int = 1,
        context: ContextRecall | None = None,
        affected_by: str | None = None,
        strategy: str = "add",
        indexed: bool = False,
    ) -> None:
        super().__init__(list(queries), qrels, metrics, relevance_level, context, affected_by)
        if strategy not in ("add", "reindex"):
            raise ConfigError(f"unknown strategy {strategy!r}; expected 'add' or 'reindex'", field="strategy")
        if strategy == "add" and not {"add", "delete"} <= set(retriever.capabilities):
            raise ConfigError(
                f"adapter {retriever.adapter!r} cannot add and delete documents; use strategy 'reindex'",
                field="retriever",
            )
        self.engine = f"rebuild ({strategy}, re-run every query)"
        self.retriever, self.kb, self.strategy = retriever, kb, strategy
        self.queries = queries.subset(self.qids)
        self.seconds = {"index": 0.0, "search": 0.0, "evaluate": 0.0}
        if not indexed:
            self._index(kb)
        self.base_run = self._search("K")
        self.base_values = self._evaluate(self.base_run)
        self.base_ids = self._top(self.base_run)
        self.base_cr = self._cr(self.base_run)

    def _index(self, corpus: Corpus) -> None:
        t0 = time.perf_counter()
        self.retriever.index(corpus)
        self.seconds["index"] += time.perf_counter() - t0

    def _search(self, name: str) -> Run:
        t0 = time.perf_counter()
        # fetch past the cut and let the Run's trec_eval order decide ties there (FAISS and bm25s break ties
        # at the cut by their own internal order)
        run = self.retriever.search(self.queries, self.depth + _TIE_MARGIN).truncate(self.depth)
        run.name = name
        self.seconds["search"] += time.perf_counter() - t0
        failed = run.failed()
        if failed:
            from retbench.errors import BackendError

            raise BackendError(f"retriever failed on query {failed[0]}: {run.errors.get(failed[0], '')}")
        return run

    def _evaluate(self, run: Run) -> np.ndarray:
        t0 = time.perf_counter()
        gm = judge_qrels(run, self.qrels, self.qids)
        values = self._values(gm)
        self.seconds["evaluate"] += time.perf_counter() - t0
        return values

    def _top(self, run: Run) -> list[list[str]]:
        return [run.docs(q)[: self.depth] if q in run else [] for q in self.qids]

    def _cr(self, run: Run) -> np.ndarray:
        if self.context is None:
            return np.full(self.n, np.nan)
        return self.context.scores(self.qids, self._top(run))

    @property
    def before(self) -> dict[str, float]:
        out = {m: float(self.base_values[:, j].mean()) for j, m in enumerate(self.metric_names)}
        if self.context is not None and self.has_ref.any():
            out["context_recall"] = float(np.nanmean(self.base_cr[self.has_ref]))
        return out

    def _with(self, corpus: Corpus, name: str) -> Run:
        if self.strategy == "add":
            t0 = time.perf_counter()
            self.retriever.add(corpus)
            self.seconds["index"] += time.perf_counter() - t0
        else:
            self._index(concat_corpora(self.kb, corpus))
        return self._search(name)

    def _restore(self, ids: Sequence[str]) -> None:
        if self.strategy == "add":
            t0 = time.perf_counter()
            self.retriever.delete(list(ids))
            self.seconds["index"] += time.perf_counter() - t0

    def _diff(
        self,
        values: np.ndarray,
        cr: np.ndarray,
        top: list[list[str]],
        ref_values: np.ndarray,
        ref_cr: np.ndarray,
        ref_top: list[list[str]],
        sign: float = 1.0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        delta = sign * (values - ref_values)
        dcr = sign * (cr - ref_cr)
        changed = np.array([a != b for a, b in zip(top, ref_top, strict=True)], dtype=bool)
        rows = np.flatnonzero(changed | (delta != 0).any(axis=1) | (np.nan_to_num(dcr) != 0))
        return rows, delta[rows], dcr[rows], changed[rows]

    def alone(self, candidates: Corpus, skip: Sequence[bool] | None = None) -> list[Impact]:
        skip = np.zeros(len(candidates), dtype=bool) if skip is None else np.asarray(skip, dtype=bool)
        parts: list[tuple[np.ndarray, ...]] = []
        for c in range(len(candidates)):
            if skip[c]:
                continue
            cid = str(candidates.ids[c])
            one = candidates.subset([cid])
            run = self._with(one, "K+d")
            try:
                rows, d, dcr, ch = self._diff(
                    self._evaluate(run), self._cr(run), self._top(run), self.base_values, self.base_cr, self.base_ids
                )
            finally:
                self._restore([cid])
            parts.append((rows, np.full(len(rows), c), d, dcr, ch))
        return self._collect("alone", [str(i) for i in candidates.ids], *self._cat(parts))

    def sequential(self, candidates: Corpus, skip: Sequence[bool] | None = None) -> list[Impact]:
        skip = np.zeros(len(candidates), dtype=bool) if skip is None else np.asarray(skip, dtype=bool)
        parts: list[tuple[np.ndarray, ...]] = []
        prev = (self.base_values, self.base_cr, self.base_ids)
        added: list[str] = []
        afters: list[dict[str, float]] = []
        kb = self.kb
        try:
            for c in range(len(candidates)):
                if not skip[c]:
                    cid = str(candidates.ids[c])
                    one = candidates.subset([cid])
                    if self.strategy == "add":
                        run = self._with(one, "K+seq")
                    else:
                        kb = concat_corpora(kb, one)
                        self._index(kb)
                        run = self._search("K+seq")
                    added.append(cid)
                    cur = (self._evaluate(run), self._cr(run), self._top(run))
                    rows, d, dcr, ch = self._diff(*cur, *prev)
                    parts.append((rows, np.full(len(rows), c), d, dcr, ch))
                    prev = cur
                means = {m: float(prev[0][:, j].mean()) for j, m in enumerate(self.metric_names)}
                if self.context is not None and self.has_ref.any():
                    means["context_recall"] = float(np.nanmean(prev[1][self.has_ref]))
                afters.append(means)
        finally:
            if self.strategy == "add":
                self._restore(added)
            else:
                self._index(self.kb)
        out = self._collect("sequential", [str(i) for i in candidates.ids], *self._cat(parts))
        for imp, a in zip(out, afters, strict=True):
            imp.after = a
        return out

    def leave_one_out(self, doc_ids: Sequence[str]) -> list[Impact]:
        parts: list[tuple[np.ndarray, ...]] = []
        for c, d in enumerate(doc_ids):
            if d not in self.kb:
                raise InputError(f"leave-one-out document {d!r} is not in the knowledge base", field="leave_one_out")
            one = self.kb.subset([d])
            if self.strategy == "add":
                self.retriever.delete([d])
            else:
                self._index(self.kb.subset([x for x in self.kb.ids if x != d]))
            try:
                run = self._search("K-d")
                rows, dd, dcr, ch = self._diff(
                    self._evaluate(run),
                    self._cr(run),
                    self._top(run),
                    self.base_values,
                    self.base_cr,
                    self.base_ids,
                    sign=-1.0,
                )
            finally:
                if self.strategy == "add":
                    self.retriever.add(one)
            parts.append((rows, np.full(len(rows), c), dd, dcr, ch))
        if self.strategy == "reindex":
            self._index(self.kb)
        return self._collect("leave_one_out", [str(d) for d in doc_ids], *self._cat(parts))


# -- the experiment: config, candidates, runner, report ------------------------------------------------
TOP_KEYS = {
    "name",
    "description",
    "output",
    "dataset",
    "retriever",
    "metrics",
    "relevance_level",
    "candidates",
    "modes",
    "leave_one_out",
    "sequential",
    "novelty",
    "context_recall",
    "gain",
    "dedupe",
    "affected_by",
    "engine",
    "encoder",
    "seed",
}
DATASET_KEYS = {"name", "path", "split", "max_queries", "join_rule", "seed"}
SOURCE_KEYS = {
    "file": {"kind", "path", "group"},
    "holdout": {"kind", "n", "seed", "group"},
    "gold": {"kind", "queries", "seed", "group"},
    "present": {"kind", "n", "seed", "group"},
    "near_duplicate": {"kind", "n", "edits", "seed", "group"},
}
REMOVING = ("holdout", "gold")  # sources that take documents out of K before the others sample from it
ENGINES = ("auto", "incremental", "rebuild", "reindex")


@dataclass
class IngestConfig:
    """A validated ingestion-impact experiment (see configs/ingest.yaml for every key)."""

    name: str
    output: Path
    dataset: dict[str, Any]
    retriever: dict[str, Any]
    metrics: list[str]
    candidates: list[dict[str, Any]]
    modes: list[str]
    relevance_level: int = 1
    leave_one_out: dict[str, Any] = field(default_factory=dict)
    sequential: dict[str, Any] = field(default_factory=dict)
    novelty: dict[str, Any] = field(default_factory=dict)
    context_recall: dict[str, Any] | None = None
    gain: GainWeights = field(default_factory=GainWeights)
    dedupe: str = "text"
    affected_by: str | None = None
    engine: str = "auto"
    encoder: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict)


def _req(cond: bool, msg: str, path: str, fld: str) -> None:
    if not cond:
        raise ConfigError(msg, path=path, field=fld)


def _keys(obj: Mapping[str, Any], allowed: set[str], path: str, where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise ConfigError(
            f"unknown key {extra[0]!r}; allowed: {', '.join(sorted(allowed))}", path=path, field=f"{where}{extra[0]}"
        )


def _pos_int(v: Any, path: str, fld: str) -> int:
    _req(isinstance(v, int) and not isinstance(v, bool) and v > 0, "must be a positive integer", path, fld)
    return int(v)


def parse_ingest_config(raw: Any, source: str = "<config>", output: str | Path | None = None) -> IngestConfig:
    """Validate an ingestion config mapping; every error names the field."""
    src = source
    _req(isinstance(raw, dict), "an ingestion config must be a mapping", src, "<top>")
    _keys(raw, TOP_KEYS, src, "")
    ds = raw.get("dataset", "scifact")
    ds = {"name": ds} if isinstance(ds, str) else ds
    _req(isinstance(ds, dict) and bool(ds.get("name") or ds.get("path")), "give a dataset name or path", src, "dataset")
    _keys(ds, DATASET_KEYS, src, "dataset.")
    if ds.get("max_queries") is not None:
        _pos_int(ds["max_queries"], src, "dataset.max_queries")
    ret = raw.get("retriever") or {
        "adapter": "dense",
        "params": {"index": "flat_ip", "normalize": True, "max_seq_length": 256},
    }
    _req(
        isinstance(ret, dict) and isinstance(ret.get("adapter"), str),
        "retriever needs an adapter",
        src,
        "retriever.adapter",
    )
    _keys(ret, {"name", "adapter", "params"}, src, "retriever.")
    _req(isinstance(ret.get("params", {}) or {}, dict), "params must be a mapping", src, "retriever.params")
    metrics = raw.get("metrics", ["recall@10", "ndcg@10", "mrr@10"])
    _req(
        isinstance(metrics, list) and all(isinstance(m, str) for m in metrics),
        "metrics must be a list of names",
        src,
        "metrics",
    )
    try:
        specs = rank_specs(metrics)
    except ConfigError as exc:
        raise ConfigError(exc.reason, path=src, field="metrics") from None
    names = [s.name for s in specs]
    level = raw.get("relevance_level", 1)
    _pos_int(level, src, "relevance_level")
    seed = raw.get("seed", 0)
    _req(isinstance(seed, int), "seed must be an integer", src, "seed")
    sources = raw.get("candidates")
    _req(isinstance(sources, list) and len(sources) > 0, "list at least one candidate source", src, "candidates")
    cands = []
    for i, s in enumerate(sources):
        where = f"candidates[{i}]"
        _req(
            isinstance(s, dict) and s.get("kind") in SOURCE_KEYS,
            f"a candidate source is a mapping with kind in {', '.join(SOURCE_KEYS)}",
            src,
            f"{where}.kind",
        )
        _keys(s, SOURCE_KEYS[s["kind"]], src, f"{where}.")
        for key in ("n", "queries", "edits"):
            if key in s:
                _pos_int(s[key], src, f"{where}.{key}")
        if s["kind"] == "file":
            _req(
                isinstance(s.get("path"), str),
                "give the path of a BEIR corpus.jsonl of candidates",
                src,
                f"{where}.path",
            )
        else:
            _req(
                ("queries" if s["kind"] == "gold" else "n") in s,
                "say how many",
                src,
                f"{where}.{'queries' if s['kind'] == 'gold' else 'n'}",
            )
        cands.append(dict(s))
    modes = raw.get("modes", ["alone"])
    _req(
        isinstance(modes, list) and modes and all(m in MODES for m in modes),
        f"modes must be a list from {', '.join(MODES)}",
        src,
        "modes",
    )
    loo = raw.get("leave_one_out") or {}
    if isinstance(loo, str):
        loo = {"group": loo}
    _req(
        isinstance(loo, dict),
        "leave_one_out is a mapping: {ids: [...]}, {sample: N} or {group: name}",
        src,
        "leave_one_out",
    )
    _keys(loo, {"ids", "sample", "seed", "group"}, src, "leave_one_out.")
    _req(
        "leave_one_out" not in modes or bool(loo),
        "mode leave_one_out needs a leave_one_out block",
        src,
        "leave_one_out",
    )
    seq = raw.get("sequential") or {}
    _req(isinstance(seq, dict), "sequential must be a mapping", src, "sequential")
    _keys(seq, {"order"}, src, "sequential.")
    _req(
        seq.get("order", "given") in ("given", "gain"),
        "order is 'given' or 'gain' (alone gain, best first)",
        src,
        "sequential.order",
    )
    nov = raw.get("novelty") or {}
    _req(isinstance(nov, dict), "novelty must be a mapping", src, "novelty")
    _keys(nov, {"chunker"}, src, "novelty.")
    _req(
        nov.get("chunker") is None or isinstance(nov["chunker"], dict),
        "chunker is a mapping {kind: ..., ...} or null",
        src,
        "novelty.chunker",
    )
    cr = raw.get("context_recall")
    if cr is not None:
        _req(
            isinstance(cr, dict) and "references" in cr,
            "context_recall needs references (gold_documents or a JSONL path)",
            src,
            "context_recall.references",
        )
        _keys(cr, {"references", "threshold", "context_k"}, src, "context_recall.")
        if "context_k" in cr:
            _pos_int(cr["context_k"], src, "context_recall.context_k")
    g = raw.get("gain") or {}
    _req(isinstance(g, dict), "gain must be a mapping", src, "gain")
    _keys(g, {"alpha", "beta", "gamma", "recall", "novelty"}, src, "gain.")
    for key in ("alpha", "beta", "gamma"):
        _req(
            isinstance(g.get(key, 0.0), (int, float)) and not isinstance(g.get(key, 0.0), bool),
            "must be a number",
            src,
            f"gain.{key}",
        )
    recall = g.get("recall") or next((m for m in names if m.startswith("recall")), None)
    _req(recall is not None, "no recall@k among the metrics; name the gain's recall metric", src, "gain.recall")
    recall = parse_metrics([recall])[0].name
    _req(recall in names, f"gain.recall {recall!r} must be one of the metrics ({', '.join(names)})", src, "gain.recall")
    _req(g.get("novelty", "min") in ("min", "mean"), "novelty aggregate is 'min' or 'mean'", src, "gain.novelty")
    weights = GainWeights(
        float(g.get("alpha", 1.0)),
        float(g.get("beta", 1.0)),
        float(g.get("gamma", 0.01)),
        recall,
        g.get("novelty", "min"),
    )
    dedupe = raw.get("dedupe", "text")
    _req(dedupe in ("id", "text"), "dedupe is 'id' or 'text'", src, "dedupe")
    engine = raw.get("engine", "auto")
    _req(engine in ENGINES, f"engine is one of {', '.join(ENGINES)}", src, "engine")
    affected = raw.get("affected_by")
    if affected is not None:
        _req(parse_metrics([affected])[0].name in names, "affected_by must be one of the metrics", src, "affected_by")
    enc = raw.get("encoder") or {}
    _req(isinstance(enc, dict), "encoder must be a mapping of Encoder settings", src, "encoder")
    name = str(raw.get("name") or Path(source).stem)
    out = Path(output) if output is not None else Path(raw.get("output") or f"results/{name}")
    return IngestConfig(
        name=name,
        output=out,
        dataset=dict(ds),
        retriever={"params": {}, **ret},
        metrics=list(metrics),
        candidates=cands,
        modes=list(dict.fromkeys(modes)),
        relevance_level=int(level),
        leave_one_out=loo,
        sequential=seq,
        novelty=nov,
        context_recall=cr,
        gain=weights,
        dedupe=dedupe,
        affected_by=affected,
        engine=engine,
        encoder=enc,
        seed=int(seed),
        source=source,
        raw=raw,
    )


def load_ingest_config(path: str | Path, output: str | Path | None = None) -> IngestConfig:
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InputError("config file not found", path=p)
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"malformed YAML ({getattr(exc, 'problem', exc)})", path=p, line=mark.line + 1 if mark else None
        ) from None
    return parse_ingest_config(raw, str(p), output)


@dataclass
class CandidateSet:
    """The knowledge base K, the candidates (with their group), and how they were made."""

    kb: Corpus
    candidates: Corpus
    groups: list[str]
    info: dict[str, Any] = field(default_factory=dict)


def build_candidates(
    corpus: Corpus,
    qrels: Qrels,
    query_ids: Sequence[str],
    sources: Sequence[Mapping[str, Any]],
    *,
    relevance_level: int = 1,
    seed: int = 0,
    base: Path | None = None,
) -> CandidateSet:
    """Make K and the candidates from the config's sources (removals first, then samples of what stays in K).

    - `gold`: the relevant documents of N random evaluation queries are removed from K and offered back;
    - `holdout`: N random documents are removed from K and offered back;
    - `present`: N random documents still in K (adding them must change nothing);
    - `near_duplicate`: light seeded edits of N other random documents of K, under new ids;
    - `file`: documents from a BEIR corpus.jsonl.
    """
    from retbench.io.beir import read_corpus

    removed: list[str] = []
    removed_set: set[str] = set()
    made: dict[
        int, tuple[list[str], list[str], list[str], list[dict[str, Any]]]
    ] = {}  # source -> ids, titles, texts, meta
    info: dict[str, Any] = {"sources": []}
    index = corpus.index
    for i, s in enumerate(sources):
        if s["kind"] not in REMOVING:
            continue
        rng = random.Random(int(s.get("seed", seed)))
        if s["kind"] == "gold":
            eligible = [
                q for q in query_ids if any(g >= relevance_level and d in index for d, g in qrels.get(q, {}).items())
            ]
            if s["queries"] > len(eligible):
                raise ConfigError(
                    f"asked for {s['queries']} gold queries, only {len(eligible)} have relevant documents in the corpus",
                    field=f"candidates[{i}].queries",
                )
            chosen = sorted(rng.sample(eligible, s["queries"]), key=list(query_ids).index)
            docs = list(
                dict.fromkeys(d for q in chosen for d, g in qrels[q].items() if g >= relevance_level and d in index)
            )
            info["sources"].append({"kind": "gold", "queries": chosen, "documents": len(docs)})
        else:
            pool = [d for d in corpus.ids if d not in removed_set]
            docs = rng.sample(pool, min(s["n"], len(pool)))
            info["sources"].append({"kind": "holdout", "documents": len(docs)})
        docs = [d for d in docs if d not in removed_set]
        removed.extend(docs)
        removed_set.update(docs)
        made[i] = (
            docs,
            [corpus.title(index[d]) for d in docs],
            [corpus.texts[index[d]] for d in docs],
            [{} for _ in docs],
        )
    kb_ids = [d for d in corpus.ids if d not in removed_set]
    if not kb_ids:
        raise ConfigError("the sources remove every document: nothing left to ingest into", field="candidates")
    taken: set[str] = set()
    for i, s in enumerate(sources):
        kind = s["kind"]
        if kind in REMOVING:
            continue
        rng = random.Random(int(s.get("seed", seed)))
        if kind == "file":
            path = Path(s["path"])
            if base is not None and not path.is_absolute() and not path.exists():
                path = base / path
            extra = read_corpus(path)
            ids = [str(x) for x in extra.ids]
            made[i] = (ids, [extra.title(j) for j in range(len(extra))], list(extra.texts), [{} for _ in ids])
            info["sources"].append({"kind": "file", "path": str(path), "documents": len(ids)})
            continue
        pool = [d for d in kb_ids if d not in taken]
        docs = rng.sample(pool, min(s["n"], len(pool)))
        taken.update(docs)
        if kind == "present":
            made[i] = (
                docs,
                [corpus.title(index[d]) for d in docs],
                [corpus.texts[index[d]] for d in docs],
                [{} for _ in docs],
            )
        else:
            edits = int(s.get("edits", 3))
            texts = [near_duplicate(corpus.texts[index[d]], rng, edits) for d in docs]
            made[i] = (
                [f"{d}~nd" for d in docs],
                [corpus.title(index[d]) for d in docs],
                texts,
                [{"near_duplicate_of": d, "edits": edits} for d in docs],
            )
        info["sources"].append({"kind": kind, "documents": len(docs)})
    ids: list[str] = []
    titles: list[str] = []
    texts: list[str] = []
    meta: list[dict[str, Any]] = []
    groups: list[str] = []
    for i, s in enumerate(sources):
        a, b, c, m = made[i]
        group = str(s.get("group") or (Path(s["path"]).stem if s["kind"] == "file" else s["kind"]))
        ids += a
        titles += b
        texts += c
        meta += [{**x, "group": group} for x in m]
        groups += [group] * len(a)
    if len(set(ids)) != len(ids):
        dup = next(x for x in ids if ids.count(x) > 1)
        raise InputError(f"candidate id {dup!r} appears twice among the candidates", field="candidates")
    cands = Corpus(ids, texts, titles, meta, join_rule=corpus.join_rule, name="candidates")
    info["removed"] = len(removed)
    return CandidateSet(corpus.subset(kb_ids), cands, groups, info)


def candidate_status(kb: Corpus, cands: Corpus, dedupe: str) -> tuple[list[str], list[str | None]]:
    """'present' (id already in K), 'duplicate' (same indexed text as a K document; with dedupe: text) or 'new'."""
    hashes: dict[str, str] = {}
    if dedupe == "text":
        for i in range(len(kb)):
            hashes.setdefault(text_hash(kb.joined(i)), str(kb.ids[i]))
    status: list[str] = []
    dup_of: list[str | None] = []
    for i in range(len(cands)):
        cid = str(cands.ids[i])
        if cid in kb:
            status.append("present")
            dup_of.append(cid)
            continue
        other = hashes.get(text_hash(cands.joined(i))) if dedupe == "text" else None
        status.append("duplicate" if other else "new")
        dup_of.append(other)
    return status, dup_of


def reference_answers(
    cfg_refs: str, ds: Dataset, qrels: Qrels, qids: Sequence[str], level: int, base: Path | None = None
) -> dict[str, list[str]]:
    """Reference answers per query: `gold_documents` (the texts of the query's relevant documents, from the full
    corpus: a stand-in where a dataset has no answers) or a JSONL file of {"query_id", "answer"} lines."""
    import json

    if cfg_refs == "gold_documents":
        idx = ds.corpus.index
        return {q: [ds.corpus.texts[idx[d]] for d, g in qrels[q].items() if g >= level and d in idx] for q in qids}
    path = Path(cfg_refs)
    if base is not None and not path.is_absolute() and not path.exists():
        path = base / path
    out: dict[str, list[str]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError("reference answers file not found", path=path) from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON ({exc.msg})", path=path, line=n) from None
        q, a = obj.get("query_id"), obj.get("answer")
        if not isinstance(q, str) or not isinstance(a, str):
            raise InputError("each line needs string fields query_id and answer", path=path, line=n)
        out.setdefault(q, []).append(a)
    return out


@dataclass
class IngestOutcome:
    config: IngestConfig
    metrics: list[str]
    before: dict[str, float]
    results: dict[str, list[Impact]]
    summary: dict[str, Any]


def study_checks(impacts: Sequence[Impact], recall: str) -> dict[str, Any]:
    """The SciFact study's 'done when' figures, computed (never asserted) from the alone impacts."""
    by = {g: [i for i in impacts if i.group == g] for g in dict.fromkeys(i.group for i in impacts)}
    out: dict[str, Any] = {"groups": {g: len(v) for g, v in by.items()}}
    gold = by.get("gold", [])
    others = [i for i in impacts if i.group != "gold"]
    if gold:
        pos = [i for i in gold if i.own_deltas.get(recall, 0.0) > 0]
        best_other = max((i.gain for i in others), default=float("-inf"))
        out["gold"] = {
            "n": len(gold),
            "positive_own_delta_recall": len(pos),
            "zero_or_negative_own_delta_recall": [i.doc_id for i in gold if i not in pos],
            "mean_own_delta_recall": float(np.mean([i.own_deltas.get(recall, 0.0) for i in gold])),
            "ranked_above_every_other_candidate": sum(i.gain > best_other for i in gold),
            "all_gold_above_all_others": all(i.gain > best_other for i in gold),
            "min_gain": min(i.gain for i in gold),
            "max_other_gain": best_other,
        }
    for g in ("near_duplicate", "present"):
        v = by.get(g, [])
        if not v:
            continue
        nov = [i.novelty.min for i in v if i.novelty is not None]
        out[g] = {
            "n": len(v),
            "novelty_below_0.05": sum(x < 0.05 for x in nov),
            "max_novelty": max(nov) if nov else None,
            "mean_novelty": float(np.mean(nov)) if nov else None,
            "recall_unchanged": sum(i.deltas.get(recall, 0.0) == 0.0 for i in v),
            "recall_changed": [
                {"doc_id": i.doc_id, recall: i.deltas.get(recall, 0.0), "lost": i.lost}
                for i in v
                if i.deltas.get(recall, 0.0) != 0.0
            ],
            "results_changed_queries": sum(len(i.changed) for i in v),
        }
    return out


def run_ingest(cfg: IngestConfig, *, log: Callable[[str], None] = print) -> IngestOutcome:
    """Run an ingestion-impact experiment and write its results directory (manifest, JSON, report.md)."""
    from retbench.chunkers import make_chunker
    from retbench.io.datasets import load_dataset
    from retbench.results import write_json
    from retbench.retrievers.base import create
    from retbench.retrievers.encoders import Encoder
    from retbench.studies.manifest import machine, package_versions

    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    base = Path(cfg.source).parent if cfg.source and not cfg.source.startswith("<") else None
    d = cfg.dataset
    split = str(d.get("split", "test"))
    t0 = time.perf_counter()
    ds = load_dataset(d.get("path") or d["name"], [split], join_rule=d.get("join_rule", "title_space_text"))
    qrels = ds.split(split)
    qids = [q for q in qrels if q in ds.queries]
    if d.get("max_queries") and d["max_queries"] < len(qids):
        rng = random.Random(int(d.get("seed", cfg.seed)))
        qids = sorted(rng.sample(qids, d["max_queries"]), key=qids.index)
    qrels = qrels.subset(qids)
    queries = ds.queries.subset(qids)
    cs = build_candidates(
        ds.corpus, qrels, qids, cfg.candidates, relevance_level=cfg.relevance_level, seed=cfg.seed, base=base
    )
    kb, cands = cs.kb, cs.candidates
    status, dup_of = candidate_status(kb, cands, cfg.dedupe)
    timings["prepare_seconds"] = time.perf_counter() - t0
    log(
        f"knowledge base: {len(kb)} documents; candidates: {len(cands)} ({', '.join(f'{g}: {cs.groups.count(g)}' for g in dict.fromkeys(cs.groups))})"
    )

    retriever = create(
        cfg.retriever["adapter"], cfg.retriever.get("params") or {}, name=cfg.retriever.get("name"), where=cfg.source
    )
    encoder = getattr(retriever, "encoder", None) or Encoder(**cfg.encoder)
    chunker = make_chunker(cfg.novelty["chunker"], where=cfg.source) if cfg.novelty.get("chunker") else None
    texts: dict[str, str] = {}
    lookup_corpora = (cands, kb, ds.corpus)

    def text_of(doc_id: str) -> str:
        if doc_id not in texts:
            for c in lookup_corpora:
                if doc_id in c:
                    texts[doc_id] = c.texts[c.index[doc_id]]
                    break
            else:
                raise InputError(f"no text for document {doc_id!r}")
        return texts[doc_id]

    context = None
    if cfg.context_recall is not None:
        refs = reference_answers(cfg.context_recall["references"], ds, qrels, qids, cfg.relevance_level, base)
        context = ContextRecall(
            refs,
            text_of,
            CosineSupport(encoder, float(cfg.context_recall.get("threshold", 0.8))),
            int(cfg.context_recall.get("context_k", 5)),
        )

    t0 = time.perf_counter()
    dense_flat = getattr(retriever, "index_type", None) == "flat_ip"
    use_incremental = cfg.engine == "incremental" or (cfg.engine == "auto" and dense_flat)
    if use_incremental and not dense_flat:
        raise ConfigError(
            "engine 'incremental' needs a dense retriever with index flat_ip", path=cfg.source, field="engine"
        )
    engine: DenseImpact | RebuildImpact
    if use_incremental:
        retriever.index(kb)
        qv = encoder.encode_queries([queries[q] for q in qids])
        kv = encoder.encode_documents(kb.joined_texts())  # cached by index(): what lets identical vectors tie exactly
        engine = DenseImpact(
            kb.ids,
            qids,
            qv,
            qrels,
            cfg.metrics,
            search=retriever.search_embeddings,
            kb_vectors=kv,
            relevance_level=cfg.relevance_level,
            context=context,
            affected_by=cfg.affected_by,
        )
    else:
        engine = RebuildImpact(
            retriever,
            kb,
            queries,
            qrels,
            cfg.metrics,
            relevance_level=cfg.relevance_level,
            context=context,
            affected_by=cfg.affected_by,
            strategy="reindex" if cfg.engine == "reindex" else "add",
        )
    timings["index_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    nov_index = NoveltyIndex(encoder, chunker)
    nov_index.add(kb)
    cand_chunks = nov_index.encode(cands)
    cand_vecs = encoder.encode_documents(cands.joined_texts()) if use_incremental else None
    timings["novelty_index_seconds"] = time.perf_counter() - t0
    before = engine.before
    log("with K: " + ", ".join(f"{m} {v:.4f}" for m, v in before.items()))

    results: dict[str, list[Impact]] = {}
    skip = [s != "new" for s in status]
    group_of = dict(zip([str(x) for x in cands.ids], cs.groups, strict=True))

    def finish(
        impacts: list[Impact], novelty: list[Novelty], st: Sequence[str], dups: Sequence[str | None]
    ) -> list[Impact]:
        for imp, nov, s, du in zip(impacts, novelty, st, dups, strict=True):
            imp.novelty, imp.status, imp.duplicate_of = nov, s, du
            imp.group = group_of.get(imp.doc_id, imp.group)
            cfg.gain.apply(imp)
        return impacts

    if "alone" in cfg.modes:
        t0 = time.perf_counter()
        if isinstance(engine, DenseImpact):
            impacts = engine.alone(cands.ids, cand_vecs, skip)
        else:
            impacts = engine.alone(cands, skip)
        novelty = nov_index.novelty(cands, encoded=cand_chunks)
        finish(impacts, novelty, status, dup_of)
        results["alone"] = sorted(impacts, key=lambda i: (-i.gain, i.doc_id))
        timings["alone_seconds"] = time.perf_counter() - t0
        log(f"alone: {len(impacts)} candidates in {timings['alone_seconds']:.2f}s")
    if "leave_one_out" in cfg.modes:
        t0 = time.perf_counter()
        loo = cfg.leave_one_out
        if "ids" in loo:
            loo_ids = [str(x) for x in loo["ids"]]
        elif "group" in loo:
            loo_ids = [c for c, g, s in zip(cands.ids, cs.groups, status, strict=True) if g == loo["group"] and c in kb]
            if not loo_ids:
                raise ConfigError(
                    f"no candidate of group {loo['group']!r} is in the knowledge base",
                    path=cfg.source,
                    field="leave_one_out.group",
                )
        else:
            loo_ids = random.Random(int(loo.get("seed", cfg.seed))).sample(
                list(kb.ids), min(int(loo["sample"]), len(kb))
            )
        impacts = engine.leave_one_out(loo_ids)
        novelty = nov_index.novelty(kb.subset(loo_ids), leave_one_out=True)
        for imp in impacts:
            group_of.setdefault(imp.doc_id, "in_kb")
        finish(impacts, novelty, ["present"] * len(loo_ids), [None] * len(loo_ids))
        results["leave_one_out"] = sorted(impacts, key=lambda i: (-i.gain, i.doc_id))
        timings["leave_one_out_seconds"] = time.perf_counter() - t0
        log(f"leave-one-out: {len(impacts)} documents in {timings['leave_one_out_seconds']:.2f}s")
    if "sequential" in cfg.modes:
        t0 = time.perf_counter()
        order = list(range(len(cands)))
        if cfg.sequential.get("order") == "gain" and "alone" in results:
            rank = {i.doc_id: n for n, i in enumerate(results["alone"])}
            order.sort(key=lambda j: rank[str(cands.ids[j])])
        ordered = cands.subset([cands.ids[j] for j in order])
        st = [status[j] for j in order]
        du = [dup_of[j] for j in order]
        seq_skip = [s != "new" for s in st]
        seen: dict[str, str] = {}
        for j in range(len(ordered)):  # a text already ingested earlier in this sequence is a duplicate too
            h = text_hash(ordered.joined(j))
            if not seq_skip[j] and cfg.dedupe == "text" and h in seen:
                st[j], du[j], seq_skip[j] = "duplicate", seen[h], True
            elif not seq_skip[j]:
                seen[h] = str(ordered.ids[j])
        if isinstance(engine, DenseImpact):
            assert cand_vecs is not None
            impacts = engine.sequential(ordered.ids, cand_vecs[order], seq_skip)
        else:
            impacts = engine.sequential(ordered, seq_skip)
        novelty = nov_index.novelty(ordered, sequential=[not s for s in seq_skip])
        results["sequential"] = finish(impacts, novelty, st, du)
        timings["sequential_seconds"] = time.perf_counter() - t0
        log(f"sequential: {len(impacts)} candidates in {timings['sequential_seconds']:.2f}s")
    if isinstance(engine, RebuildImpact):
        timings.update({f"rebuild_{k}_seconds": v for k, v in engine.seconds.items()})
    retriever.close()
    timings["total_seconds"] = time.perf_counter() - t_all
    timings = {k: round(v, 3) for k, v in timings.items()}

    summary: dict[str, Any] = {
        "before": before,
        "evaluation_queries": engine.n,
        "skipped_no_relevant": engine.skipped,
        "knowledge_base_documents": len(kb),
        "candidates": len(cands),
        "status": {s: status.count(s) for s in STATUSES},
        "engine": engine.engine,
        "affected_by": engine.metric_names[engine.affected],
        "gain": asdict(cfg.gain),
        "modes": {m: len(v) for m, v in results.items()},
    }
    if "alone" in results:
        summary["study"] = study_checks(results["alone"], cfg.gain.recall)
    if results.get("sequential"):
        summary["after_sequential"] = results["sequential"][-1].after
    out = cfg.output
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "experiment": cfg.name,
        "kind": "ingest-impact",
        "config": cfg.raw,
        "config_file": cfg.source,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": package_versions(),
        "machine": machine(),
        "dataset": {
            "name": ds.name,
            "path": ds.path,
            "split": split,
            "queries": len(qids),
            "corpus_fingerprint": ds.corpus.fingerprint(),
            "join_rule": ds.corpus.join_rule,
        },
        "knowledge_base": {"documents": len(kb), "fingerprint": kb.fingerprint()},
        "candidates": {"documents": len(cands), "fingerprint": cands.fingerprint(), **cs.info},
        "retriever": retriever.describe(),
        "engine": engine.engine,
        "encoder": encoder.describe(),
        "novelty": nov_index.describe(),
        "context_recall": None
        if context is None
        else {
            **context.judge.describe(),
            "context_k": context.context_k,
            "references": cfg.context_recall["references"] if cfg.context_recall else None,
            "queries_with_references": int(engine.has_ref.sum()),
        },
        "metrics": engine.metric_names,
        "depth": engine.depth,
        "timings": timings,
    }
    write_json(out / "manifest.json", manifest)
    write_json(out / "summary.json", summary)
    for mode, impacts in results.items():
        name = "candidates.json" if mode == "alone" else f"{mode}.json"
        write_json(out / name, [i.to_dict() for i in impacts])
    (out / "report.md").write_text(
        render_report(cfg, engine.metric_names, before, results, summary, manifest), encoding="utf-8"
    )
    return IngestOutcome(cfg, engine.metric_names, before, results, summary)


# -- report ---------------------------------------------------------------------------------------------
def _signed(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    return "0" if x == 0 else f"{x:+.{digits}f}"


COMPACT = ("#", "document", "group", "status", "gain", "novelty min", "changed", "gained", "lost")


def impact_rows(
    impacts: Sequence[Impact], metrics: Sequence[str], recall: str, *, compact: bool = False
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the candidates table (report.md; `compact` keeps a terminal's width: the gain's
    recall delta and the columns in COMPACT)."""
    header = [
        "#",
        "document",
        "group",
        "status",
        "gain",
        "novelty min",
        "novelty mean",
        "nearest (cos)",
        *(f"Δ{m}" for m in metrics),
        "Δcontext recall",
        f"own Δ{recall}",
        "changed",
        "gained",
        "lost",
    ]
    rows = []
    for n, i in enumerate(impacts, start=1):
        nov = i.novelty
        near = f"{nov.nearest_doc} ({nov.max_cos:.3f})" if nov is not None and nov.nearest_doc is not None else "–"
        rows.append(
            [
                str(n),
                i.doc_id,
                i.group,
                i.status + (f" ({i.duplicate_of})" if i.status == "duplicate" else ""),
                f"{i.gain:.4f}",
                f"{nov.min:.3f}" if nov else "–",
                f"{nov.mean:.3f}" if nov else "–",
                near,
                *(_signed(i.deltas.get(m)) for m in metrics),
                _signed(i.d_context_recall),
                _signed(i.own_deltas.get(recall)) if i.own_queries else "–",
                str(len(i.changed)),
                str(len(i.gained)),
                str(len(i.lost)),
            ]
        )
    if compact:
        keep = [j for j, h in enumerate(header) if h in COMPACT or h == f"Δ{recall}"]
        return [header[j] for j in keep], [[r[j] for j in keep] for r in rows]
    return header, rows


def render_report(
    cfg: IngestConfig,
    metrics: Sequence[str],
    before: Mapping[str, float],
    results: Mapping[str, list[Impact]],
    summary: Mapping[str, Any],
    manifest: Mapping[str, Any],
) -> str:
    """report.md: the ranked candidates table, group means, study checks, sequential and leave-one-out tables."""
    g = cfg.gain
    lines = [
        f"# Ingestion impact: {cfg.name}",
        "",
        f"Dataset {manifest['dataset']['name']} ({manifest['dataset']['split']}, {summary['evaluation_queries']} evaluation queries); "
        f"knowledge base K = {summary['knowledge_base_documents']} documents; {summary['candidates']} candidates. "
        f"Retriever `{manifest['retriever'].get('adapter')}`; engine: {summary['engine']}.",
        "",
        "With K: " + ", ".join(f"{m} = {v:.4f}" for m, v in before.items()) + ".",
        "",
        f"Gain = {g.alpha:g} × Δ{g.recall} + {g.beta:g} × Δcontext recall + {g.gamma:g} × novelty ({g.novelty} over chunks). "
        "Δ = metric mean over the evaluation queries with K + {d} minus with K; novelty = 1 − best cosine to K's chunks. "
        "'changed' counts queries whose top-k changed; 'gained'/'lost' those whose "
        f"{summary.get('affected_by', metrics[0])} went up/down (see candidates.json for the ids).",
        "",
    ]
    if "alone" in results:
        h, rows = impact_rows(results["alone"], metrics, g.recall)
        lines += ["## Candidates ranked by gain (each alone against K)", "", md_table(h, rows), ""]
        lines += ["### Affected queries of the 10 best candidates", ""]
        for i in results["alone"][:10]:
            lines.append(
                f"- {i.doc_id}: changed {len(i.changed)}; gained: {', '.join(i.gained) or 'none'}; "
                f"lost: {', '.join(i.lost) or 'none'}; own queries: {', '.join(i.own_queries) or 'none'}"
            )
        lines.append("")
        groups = list(dict.fromkeys(i.group for i in results["alone"]))
        if len(groups) > 1:
            gh = [
                "group",
                "n",
                "mean gain",
                "mean novelty min",
                *(f"mean Δ{m}" for m in metrics),
                "candidates with changed results",
            ]
            grows = []
            for grp in groups:
                v = [i for i in results["alone"] if i.group == grp]
                grows.append(
                    [
                        grp,
                        str(len(v)),
                        f"{np.mean([i.gain for i in v]):.4f}",
                        f"{np.mean([i.novelty.min for i in v if i.novelty]):.3f}",
                        *(_signed(float(np.mean([i.deltas[m] for i in v])), 5) for m in metrics),
                        str(sum(bool(i.changed) for i in v)),
                    ]
                )
            lines += ["## By group", "", md_table(gh, grows), ""]
        st = summary.get("study", {})
        if "gold" in st:
            gd = st["gold"]
            lines += [
                "## Study checks",
                "",
                f"- removed gold documents with positive own-query Δ{g.recall}: {gd['positive_own_delta_recall']} of {gd['n']} "
                f"(mean own-query Δ{g.recall} {gd['mean_own_delta_recall']:+.3f}); not positive: {', '.join(gd['zero_or_negative_own_delta_recall']) or 'none'}",
                f"- gold documents ranked above every other candidate by gain: {gd['ranked_above_every_other_candidate']} of {gd['n']} "
                f"(lowest gold gain {gd['min_gain']:.4f}, highest other {gd['max_other_gain']:.4f})",
            ]
            for grp in ("near_duplicate", "present"):
                if grp in st:
                    x = st[grp]
                    lines.append(
                        f"- {grp}: novelty < 0.05 for {x['novelty_below_0.05']} of {x['n']} (max {x['max_novelty']:.4f}); "
                        f"Δ{g.recall} = 0 for {x['recall_unchanged']} of {x['n']}; queries whose top-k changed: {x['results_changed_queries']}"
                    )
            lines.append("")
    if "sequential" in results:
        h = [
            "step",
            "document",
            "group",
            "status",
            "gain",
            "novelty min",
            *(f"Δ{m}" for m in metrics),
            "Δcontext recall",
            *(m for m in metrics),
        ]
        rows = []
        for n, i in enumerate(results["sequential"], start=1):
            a = i.after or {}
            rows.append(
                [
                    str(n),
                    i.doc_id,
                    i.group,
                    i.status,
                    f"{i.gain:.4f}",
                    f"{i.novelty.min:.3f}" if i.novelty else "–",
                    *(_signed(i.deltas.get(m)) for m in metrics),
                    _signed(i.d_context_recall),
                    *(f"{a.get(m, float('nan')):.4f}" for m in metrics),
                ]
            )
        lines += [
            "## Sequential ingestion (cumulative; metric columns are the means after each step)",
            "",
            f"Order: {cfg.sequential.get('order', 'given')}.",
            "",
            md_table(h, rows),
            "",
        ]
    if "leave_one_out" in results:
        h, rows = impact_rows(results["leave_one_out"], metrics, g.recall)
        lines += [
            "## Leave-one-out (documents in K: metric with K minus without d; novelty against K without d)",
            "",
            md_table(h, rows),
            "",
        ]
    lines += [
        "Timings (s): " + ", ".join(f"{k.removesuffix('_seconds')} {v}" for k, v in manifest["timings"].items()),
        "",
    ]
    return "\n".join(lines)
