"""The Run: the interchange of the product (qid -> ranked doc ids and scores, status, latency).

Every retriever produces one, every judge and metric consumes one, and it round-trips through TREC
run files so any run can be checked with trec_eval. It is stored columnar (flat arrays plus
per-query offsets) so that judging and metrics are vectorized instead of walking dicts of dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, pairwise, repeat
from typing import Any

import numpy as np

from retbench.data.keys import may_repeat
from retbench.data.lazy_ids import IdColumn, LazyIds, MappingIds, intern_ids
from retbench.data.locate import locate
from retbench.data.run_input import read_rankings
from retbench.data.status import MISSING, QueryStatus


class Run:
    """Ranked results per query, in trec_eval order, plus per-query status, latency and error.

    Order within a query is score descending, ties broken by doc id descending (trec_eval's rule);
    a doc id that appears twice in one ranking keeps its first occurrence and is counted in
    `n_duplicates`. Scores are float64.
    """

    def __init__(
        self,
        query_ids: list[str],
        offsets: np.ndarray,
        doc_ids: np.ndarray | None,
        scores: np.ndarray,
        *,
        status: Mapping[str, QueryStatus] | None = None,
        latency: Mapping[str, float] | None = None,
        errors: Mapping[str, str] | None = None,
        name: str = "",
        n_duplicates: int = 0,
        latency_batch: Mapping[str, int] | None = None,
        _sorted: bool = False,
        _unique: bool = False,
        _owned: bool = False,
        _maps: list[Mapping[str, float]] | None = None,
        _lazy: LazyIds | None = None,
        _doc_key: np.ndarray | None = None,
        _key_exact: bool = False,
    ) -> None:
        self.name = name
        self.query_ids = list(query_ids)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.scores = np.asarray(scores, dtype=np.float64)
        self.n_duplicates = n_duplicates
        self._vocab: np.ndarray | None = None
        self._codes: np.ndarray | None = None
        # Runs built from {qid: {doc: score}} keep those mappings (judging looks judged docs up in
        # them), runs read from TREC files keep the ids as bytes: either way `doc_ids` is only
        # materialized when something asks for it.
        self._lazy: LazyIds | None = MappingIds(_maps, self.offsets) if _maps is not None else _lazy
        if doc_ids is None and self._lazy is None:
            raise ValueError("doc_ids are required")
        self._doc_ids: np.ndarray | None = None if doc_ids is None else np.asarray(doc_ids, dtype=object)
        self._perm: np.ndarray | None = None  # lazy doc ids: the sort applied to the source's order
        # positions (sorted) whose score is shared within their query, and their doc ids in trec_eval order
        self._tied_pos = np.zeros(0, dtype=np.int64)
        self._tied_docs = np.zeros(0, dtype=object)
        self._owned = _owned  # doc_ids is ours to reorder in place (built by a constructor here)
        # a `keys` key per ranked doc, aligned with doc_ids (set by the TREC reader, which has the bytes);
        # `_key_exact`: every key is exact (ids of at most 8 bytes), so equal keys need no string check
        self._doc_key = _doc_key
        self._key_exact = _key_exact
        if not _sorted:
            self._normalize(unique=_unique)
        # the query -> row map and the full status dict are built on first use: a 100k-query run
        # evaluated against qrels in its own query order needs neither
        self._pos_map: dict[str, int] | None = None
        self._status: dict[str, QueryStatus] | None = None
        given = {q: QueryStatus(g) for q, g in (status or {}).items() if g is not None}
        self._given_status = {q: g for q, g in given.items() if q in self._pos} if given else {}
        self.latency: dict[str, float] = {q: float(v) for q, v in (latency or {}).items()}
        # queries timed together with this one when more than one: its latency is that batch's wall time
        # divided evenly (an amortised share, not a time measured for the query alone)
        self.latency_batch: dict[str, int] = {q: int(n) for q, n in (latency_batch or {}).items() if int(n) > 1}
        self.errors: dict[str, str] = dict(errors or {})

    @property
    def _maps(self) -> list[Mapping[str, float]] | None:
        """The `{doc: score}` mappings a run was built from (judging looks judged ids up in them)."""
        return self._lazy.maps if isinstance(self._lazy, MappingIds) else None

    @property
    def _pos(self) -> dict[str, int]:
        if self._pos_map is None:
            self._pos_map = dict(zip(self.query_ids, range(len(self.query_ids)), strict=True))
        return self._pos_map

    @property
    def status(self) -> dict[str, QueryStatus]:
        """What happened to each query: `ok` / `empty` by its ranking, unless given otherwise."""
        if self._status is None:
            status = dict.fromkeys(self.query_ids, QueryStatus.OK)
            for i in np.flatnonzero(self.offsets[1:] == self.offsets[:-1]).tolist():
                status[self.query_ids[i]] = QueryStatus.EMPTY
            status.update(self._given_status)
            self._status = status
        return self._status

    def status_values(self, query_ids: Sequence[str], rows: np.ndarray) -> list[str]:
        """The status value of each query id (`missing` where the run lacks it); `rows` are the run's
        rows of those ids (-1: absent), so a run whose statuses all follow from its rankings needs no
        per-query dict lookups."""
        if self._status is not None or self._given_status:
            value: dict[QueryStatus | None, str] = {**{s: s.value for s in QueryStatus}, None: MISSING}
            return list(map(value.__getitem__, map(self.status.get, query_ids)))
        empty = (
            (self.offsets[1:] == self.offsets[:-1])[np.maximum(rows, 0)]
            if len(self.query_ids)
            else np.zeros(len(rows), dtype=bool)
        )
        codes = np.where(rows < 0, 0, np.where(empty, 2, 1))
        return np.array([MISSING, QueryStatus.OK.value, QueryStatus.EMPTY.value], dtype=object)[codes].tolist()

    @property
    def doc_ids(self) -> np.ndarray:
        """Doc ids of every query, concatenated in rank order (object array; see `offsets`)."""
        if self._doc_ids is None:
            assert self._lazy is not None
            docs = self._lazy.all()
            if self._perm is not None:
                docs = docs[self._perm]
            elif not docs.flags.writeable:
                docs = docs.copy()
            if len(self._tied_pos):
                docs[self._tied_pos] = self._tied_docs
            self._doc_ids = docs
        return self._doc_ids

    @doc_ids.setter
    def doc_ids(self, value: np.ndarray) -> None:
        self._doc_ids = value

    def _docs_at(self, positions: np.ndarray) -> np.ndarray:
        """Doc ids at some positions without materializing all of them (lazy runs)."""
        if self._doc_ids is not None:
            return self._doc_ids[positions]
        assert self._lazy is not None
        out = self._lazy.take(self._perm[positions] if self._perm is not None else positions)
        if len(self._tied_pos) and len(positions):
            k = np.minimum(np.searchsorted(self._tied_pos, positions), len(self._tied_pos) - 1)
            tied = self._tied_pos[k] == positions
            out[tied] = self._tied_docs[k[tied]]
        return out

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_dict(
        cls,
        results: Mapping[str, Mapping[str, float] | Sequence[tuple[str, float]]],
        **kwargs: Any,
    ) -> Run:
        """From `{qid: {doc: score}}` or `{qid: [(doc, score), ...]}` (order is re-established).

        Doc ids become strings. Mappings whose ids are strings (checked on each ranking's first id) are
        not copied: the run keeps them, reads its doc ids from them only when asked, and judging looks
        judged ids up in them. Do not modify them while the run is in use (a changed size is detected).

        Held to a run file's rules first (`ids.rankings_problem`): an id that is not text or a null, NaN
        or infinite score is an InputError naming `run[query][doc]`, never a silent number.
        """
        read = read_rankings(results)
        if read.maps is None:
            return cls(read.query_ids, read.offsets, read.doc_ids, read.scores, _owned=True, **kwargs)
        if kwargs.get("_sorted"):
            docs = np.fromiter(chain.from_iterable(read.maps), dtype=object, count=len(read.scores))
            return cls(read.query_ids, read.offsets, docs, read.scores, _unique=True, _owned=True, **kwargs)
        return cls(read.query_ids, read.offsets, None, read.scores, _unique=True, _maps=read.maps, **kwargs)

    @classmethod
    def from_keyed_ids(
        cls,
        query_ids: list[str],
        offsets: np.ndarray,
        ids: LazyIds,
        keys: np.ndarray,
        keys_exact: bool,
        scores: np.ndarray,
        *,
        name: str = "",
        unique: bool = False,
    ) -> Run:
        """A run whose doc ids stay in a reader's columns (`ids`) with a 64-bit key per ranked doc (`data.keys`);
        `keys_exact`: every key is the id itself (ids of at most 8 bytes); `unique`: no query repeats an id."""
        return cls(
            query_ids, offsets, None, scores, name=name, _lazy=ids, _doc_key=keys, _key_exact=keys_exact, _unique=unique
        )

    @classmethod
    def empty(cls, name: str = "") -> Run:
        return cls([], np.zeros(1, dtype=np.int64), np.zeros(0, dtype=object), np.zeros(0), name=name)

    def _normalize(self, unique: bool = False) -> None:
        """Sort each query into trec_eval order and drop repeated doc ids (first kept).

        Built for the common case, rankings that arrive sorted by score with distinct scores and ids:
        then only O(n) vectorized checks run. Sorting, tie-breaking (doc id descending, by string) and
        de-duplication cost time only where they are needed. `unique` promises no repeated ids
        (rankings that came from mappings).
        """
        n = len(self.scores)
        if (self._doc_ids is not None and len(self._doc_ids) != n) or self.offsets[-1] != n or self.offsets[0] != 0:
            raise ValueError("doc_ids, scores and offsets disagree in length")
        if n == 0:
            return
        if not unique:
            self._drop_duplicates()
            n = len(self.scores)
        s = self.scores
        # pairs (i, i + 1) that straddle two queries do not constrain the order. One pass finds the pairs in
        # a query that rise or tie (usually few); a NaN anywhere makes the sum NaN.
        starts = self.offsets[1:-1]
        straddle = starts[(starts > 0) & (starts < n)] - 1
        tied = np.greater_equal(s[1:], s[:-1])
        tied[straddle] = False
        pairs = np.flatnonzero(tied)
        if (np.isnan(s.sum()) and np.isnan(s).any()) or (s[pairs + 1] > s[pairs]).any():
            qidx = np.repeat(np.arange(len(self.query_ids), dtype=np.int64), np.diff(self.offsets))
            order = np.lexsort((-s, qidx))  # stable: ties keep input order until broken below
            if self._doc_ids is None:
                self._perm = order
            else:
                self._doc_ids = self._doc_ids[order]
            if self._doc_key is not None:
                self._doc_key = self._doc_key[order]
            self.scores = s = s[order]
            tied = s[1:] == s[:-1]
            tied[straddle] = False
            pairs = np.flatnonzero(tied)
        if len(pairs):  # (in order, a pair that does not fall is a tie)
            self._break_ties(tied)

    def _drop_duplicates(self) -> None:
        """Drop repeated (query, doc) pairs, keeping the first occurrence in input order."""
        if self._doc_key is not None and not may_repeat(self.offsets, self._doc_key):
            return  # exact: no query holds a key twice, so no doc id twice
        docs = self.doc_ids.tolist()
        bounds = self.offsets.tolist()
        if all(len(set(docs[a:b])) == b - a for a, b in pairwise(bounds) if b - a > 1):
            return
        n = len(docs)
        qidx = np.repeat(np.arange(len(self.query_ids), dtype=np.int64), np.diff(self.offsets))
        vocab, codes = intern_ids(self.doc_ids)
        _, first_pos = np.unique(qidx * max(len(vocab), 1) + codes, return_index=True)
        keep = np.zeros(n, dtype=bool)
        keep[first_pos] = True
        self.n_duplicates += int(n - keep.sum())
        self.doc_ids, self.scores = self.doc_ids[keep], self.scores[keep]
        if self._doc_key is not None:
            self._doc_key = self._doc_key[keep]
        self.offsets = np.concatenate([[0], np.cumsum(np.bincount(qidx[keep], minlength=len(self.query_ids)))]).astype(
            np.int64
        )

    def _break_ties(self, tied: np.ndarray) -> None:
        """Order each run of equal scores within a query by doc id descending (trec_eval), touching only ties."""
        member = np.zeros(len(self.scores), dtype=bool)
        member[:-1] |= tied
        member[1:] |= tied
        idx = np.flatnonzero(member)
        new_group = np.ones(len(idx), dtype=bool)
        new_group[1:] = ~tied[idx[1:] - 1]
        group = np.cumsum(new_group)
        tied_docs = self._docs_at(idx)
        _, codes = intern_ids(tied_docs)
        order = np.lexsort((-codes, group))
        self._tied_pos, self._tied_docs = idx, tied_docs[order]
        if np.array_equal(order, np.arange(len(order))):
            return
        if self._doc_ids is not None:
            docs = self._doc_ids if self._owned else self._doc_ids.copy()  # never reorder a caller's array
            docs[idx] = self._tied_docs
            self._doc_ids = docs
        if self._doc_key is not None:  # built by a reader here, never a caller's: reordered in place (if writeable)
            self._doc_key = self._doc_key if self._doc_key.flags.writeable else self._doc_key.copy()
            self._doc_key[idx] = self._doc_key[idx[order]]

    # -- access ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.query_ids)

    def __contains__(self, qid: object) -> bool:
        return qid in self._pos

    def __iter__(self) -> Iterator[str]:
        return iter(self.query_ids)

    def span(self, qid: str) -> slice:
        """The positions of query `qid`'s ranking in `doc_ids` and `scores`."""
        i = self._pos[qid]
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def rows(self, query_ids: Sequence[str]) -> np.ndarray:
        """The run's row of each query id (-1 where the run has no such query)."""
        if len(query_ids) == len(self.query_ids) and list(query_ids) == self.query_ids:  # the same queries, in order
            return np.arange(len(query_ids), dtype=np.int64)
        return np.fromiter(map(self._pos.get, query_ids, repeat(-1)), dtype=np.int64, count=len(query_ids))

    def locate(self, rows: np.ndarray, doc_ids: np.ndarray | IdColumn) -> tuple[np.ndarray, np.ndarray]:
        """Where (row, doc id) pairs are ranked: (indices of the pairs found, their 0-based ranks).

        What judging is built on; the cost follows the number of pairs, not the depth of the run
        (see `retbench.data.locate`)."""
        return locate(self, rows, doc_ids)

    def docs(self, qid: str) -> list[str]:
        """Doc ids of a query, rank 1 first (read alone from a lazy run's source)."""
        s = self.span(qid)
        if self._doc_ids is None:
            return self._docs_at(np.arange(s.start, s.stop, dtype=np.int64)).tolist()
        return self._doc_ids[s].tolist()

    def ranking(self, qid: str) -> list[tuple[str, float]]:
        s = self.span(qid)
        return list(zip(self.docs(qid), self.scores[s].tolist(), strict=True))

    def __getitem__(self, qid: str) -> list[tuple[str, float]]:
        return self.ranking(qid)

    def to_dict(self) -> dict[str, dict[str, float]]:
        docs, scores, bounds = self.doc_ids.tolist(), self.scores.tolist(), self.offsets.tolist()
        return {
            q: dict(zip(docs[a:b], scores[a:b], strict=True))
            for q, (a, b) in zip(self.query_ids, pairwise(bounds), strict=True)
        }

    @property
    def depth(self) -> int:
        """The longest ranking's length."""
        return int(np.diff(self.offsets).max()) if len(self.query_ids) else 0

    def doc_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted vocabulary, int64 code per ranked doc): vectorized judging works on codes."""
        if self._codes is None:
            self._vocab, self._codes = intern_ids(self.doc_ids)
        assert self._vocab is not None
        return self._vocab, self._codes

    def failed(self) -> list[str]:
        """Queries whose status is a failure (error, timeout, invalid)."""
        return [q for q in self.query_ids if self.status[q].failed]

    def answered(self) -> list[str]:
        return [q for q in self.query_ids if not self.status[q].failed]

    # -- derivation -----------------------------------------------------------------------------
    def _same_queries(self, offsets: np.ndarray, take: np.ndarray) -> Run:
        """A run of the same queries, statuses and latencies holding the ranked docs `take` selects (an index
        or a mask, in order), with `offsets` for them."""
        return Run(
            self.query_ids,
            np.asarray(offsets, dtype=np.int64),
            self.doc_ids[take],
            self.scores[take],
            status=self.status,
            latency=self.latency,
            latency_batch=self.latency_batch,
            errors=self.errors,
            name=self.name,
            n_duplicates=self.n_duplicates,
            _sorted=True,
        )

    def truncate(self, depth: int) -> Run:
        """Keep at most `depth` docs per query."""
        counts = np.minimum(np.diff(self.offsets), depth)
        starts = self.offsets[:-1]
        idx = (
            np.concatenate([np.arange(s, s + c) for s, c in zip(starts, counts, strict=True)])
            if len(counts)
            else np.zeros(0, dtype=np.int64)
        ).astype(np.int64)
        return self._same_queries(np.concatenate([[0], np.cumsum(counts)]), idx)

    def without_identical_ids(self) -> Run:
        """The run without any retrieved doc whose id equals its query's id.

        BEIR and MTEB evaluate this way (`ignore_identical_ids`): on ArguAna and Quora the query is
        itself a corpus document, which would otherwise sit at rank 1. Statuses and latencies are kept.
        """
        lengths = np.diff(self.offsets)
        owner = np.repeat(np.asarray(self.query_ids, dtype=object), lengths)
        keep = self.doc_ids != owner if len(owner) else np.zeros(0, dtype=bool)
        if keep.all():
            return self
        kept = np.add.reduceat(keep.astype(np.int64), self.offsets[:-1]) if len(keep) else lengths
        kept = np.where(lengths > 0, kept, 0)  # reduceat reads an empty query's slot from the next one
        return self._same_queries(np.concatenate([[0], np.cumsum(kept)]), keep)

    def subset(self, qids: Iterable[str]) -> Run:
        """The given queries (those present), in the given order."""
        keep = [q for q in qids if q in self._pos]
        parts = [self.span(q) for q in keep]
        idx = (
            np.concatenate([np.arange(s.start, s.stop) for s in parts]).astype(np.int64)
            if parts
            else np.zeros(0, dtype=np.int64)
        )
        offsets = np.concatenate([[0], np.cumsum([s.stop - s.start for s in parts])]).astype(np.int64)
        return Run(
            keep,
            offsets,
            self.doc_ids[idx],
            self.scores[idx],
            status={q: self.status[q] for q in keep},
            latency={q: self.latency[q] for q in keep if q in self.latency},
            latency_batch={q: self.latency_batch[q] for q in keep if q in self.latency_batch},
            errors={q: self.errors[q] for q in keep if q in self.errors},
            name=self.name,
            _sorted=True,
        )

    @staticmethod
    def concat(runs: Sequence[Run], name: str = "") -> Run:
        """Join runs over disjoint query sets (e.g. a resumed run's journal and its new part)."""
        qids: list[str] = [q for r in runs for q in r.query_ids]
        if len(set(qids)) != len(qids):
            raise ValueError("runs to concatenate share query ids")
        lengths = np.concatenate([np.diff(r.offsets) for r in runs]) if runs else np.zeros(0, dtype=np.int64)
        status: dict[str, QueryStatus] = {}
        latency: dict[str, float] = {}
        batch: dict[str, int] = {}
        errors: dict[str, str] = {}
        for r in runs:
            status.update(r.status)
            latency.update(r.latency)
            batch.update(r.latency_batch)
            errors.update(r.errors)
        return Run(
            qids,
            np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            np.concatenate([r.doc_ids for r in runs]) if runs else np.zeros(0, dtype=object),
            np.concatenate([r.scores for r in runs]) if runs else np.zeros(0),
            status=status,
            latency=latency,
            latency_batch=batch,
            errors=errors,
            name=name or (runs[0].name if runs else ""),
            n_duplicates=sum(r.n_duplicates for r in runs),
            _sorted=True,
        )

    def __repr__(self) -> str:
        return f"Run(name={self.name!r}, queries={len(self)}, docs={len(self.scores)}, failed={len(self.failed())})"
