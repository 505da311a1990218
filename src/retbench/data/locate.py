"""Locating judged (query, doc) pairs in a Run: the lookup judging is built on (`Run.locate`).

It lives in data/ because it reads how a Run stores its ids (mappings, 64-bit keys, interned codes);
nothing outside data/ needs to know.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Protocol

import numpy as np

from retbench.data.keys import key_strings, lookup
from retbench.data.lazy_ids import IdColumn, LazyIds, MappingIds


class Run(Protocol):
    """What locating reads of a `retbench.data.run.Run`: its columns and how it keeps its ids (declared here,
    read-only, so data/run.py imports this module and not the other way round)."""

    @property
    def offsets(self) -> np.ndarray: ...
    @property
    def scores(self) -> np.ndarray: ...
    @property
    def doc_ids(self) -> np.ndarray: ...
    @property
    def _codes(self) -> np.ndarray | None: ...
    @property
    def _doc_key(self) -> np.ndarray | None: ...
    @property
    def _key_exact(self) -> bool: ...
    @property
    def _lazy(self) -> LazyIds | None: ...
    @property
    def _maps(self) -> list[Mapping[str, float]] | None: ...
    @property
    def _tied_docs(self) -> np.ndarray: ...
    @property
    def _tied_pos(self) -> np.ndarray: ...
    def _docs_at(self, positions: np.ndarray) -> np.ndarray: ...
    def doc_codes(self) -> tuple[np.ndarray, np.ndarray]: ...


def locate(run: Run, rows: np.ndarray, docs: np.ndarray | IdColumn) -> tuple[np.ndarray, np.ndarray]:
    """Where judged (run row, doc id) pairs sit in the run: (indices of the pairs found, their 0-based ranks).

    `docs`: the judged ids as strings, or an `IdColumn` (whose keys, when a reader kept them, spare the
    keyed lookup below from making the ids strings).

    Work is proportional to the number of pairs wherever the run allows it: a run built from
    `{qid: {doc: score}}` mappings answers by one dict lookup per pair and a vectorized binary search
    over the query's sorted scores; a run read from a TREC file by a hash lookup over its 64-bit doc
    keys; a run whose doc codes are already interned by one gather over those codes; any other run is
    scanned once, looking each ranked doc up among the judged ids only.
    """
    column = docs if isinstance(docs, IdColumn) else IdColumn(np.asarray(docs, dtype=object))
    if len(rows) == 0 or len(run.scores) == 0:
        return (np.zeros(0, dtype=np.int64),) * 2
    found = _locate_by_maps(run, rows, column.strings()) if run._maps is not None else None
    if found is None and run._codes is None and run._doc_key is not None:
        found = _locate_by_keys(run, rows, column)
    if found is None:
        strings = column.strings()
        found = _locate_by_codes(run, rows, strings) if run._codes is not None else _locate_by_scan(run, rows, strings)
    return found


def _locate_by_maps(run: Run, jrr: np.ndarray, jd: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(judgement indices found in the run, their 0-based ranks) via the run's {doc: score} maps.

    Returns None when the maps no longer agree with the run (a mapping changed after the run was
    built); the caller then falls back to a scan, which reports the change.
    """
    maps, ids = run._maps, run._lazy
    assert maps is not None and isinstance(ids, MappingIds)
    if not ids.unchanged():
        return None
    # the score of every judged doc in its query's mapping, NaN when not ranked; for plain dicts the
    # lookups are driven from C (map over dict.get), other mappings go through their own .get
    owners = ids.owners(jrr)
    if set(map(type, maps)) <= {dict}:
        lookups: Iterable[float] = map(dict.get, owners, jd.tolist(), repeat(np.nan))  # type: ignore[arg-type]
    else:
        lookups = (m.get(d, np.nan) for m, d in zip(owners, jd.tolist(), strict=True))
    got = np.fromiter(lookups, dtype=np.float64, count=len(jd))
    which = np.flatnonzero(~np.isnan(got))
    if len(which) == 0:
        return which, np.zeros(0, dtype=np.int64)
    target = got[which]
    rr, d = jrr[which], jd[which]
    starts, stops = run.offsets[rr], run.offsets[rr + 1]
    scores = run.scores
    # doc ids are needed only where scores tie; the run keeps those (the others are never materialized)
    tied_pos, tied_docs = run._tied_pos, run._tied_docs
    last = max(len(tied_pos) - 1, 0)

    def before(pos: np.ndarray) -> np.ndarray:
        """Whether the ranked doc at `pos[i]` comes before judged doc i in trec_eval order
        (score descending, then doc id descending)."""
        sm = scores[pos]
        out = sm > target
        if len(tied_pos):
            tie = np.flatnonzero(sm == target)
            # an equal score outside every tie group can only be the judged doc itself (not before it)
            k = np.minimum(np.searchsorted(tied_pos, pos[tie]), last)
            grouped = tied_pos[k] == pos[tie]
            if grouped.any():
                g = tie[grouped]
                out[g] = np.greater(tied_docs[k[grouped]], d[g])
        return out

    # branchless binary search, all judgements at once: rank = how many ranked docs come before. Each
    # step probes every judgement (a probe past its ranking's end is read at the last doc and not taken),
    # so no step gathers a subset.
    rank = np.zeros(len(which), dtype=np.int64)
    last_doc = stops - 1
    longest = int((stops - starts).max())
    step = 1 << max(longest.bit_length() - 1, 0)
    while step:
        probe = starts + rank
        probe += step - 1
        inside = probe <= last_doc
        np.minimum(probe, last_doc, out=probe)
        inside &= before(probe)
        np.add(rank, step, out=rank, where=inside)
        step >>= 1
    lo = starts + rank
    if not np.all(lo < stops) or not np.all(scores[np.minimum(lo, len(scores) - 1)] == target):
        return None
    k = np.minimum(np.searchsorted(tied_pos, lo), last)
    grouped = (tied_pos[k] == lo) if len(tied_pos) else np.zeros(len(lo), dtype=bool)
    if not np.all(tied_docs[k[grouped]] == d[grouped]):
        return None
    return which, rank


def _match(
    run: Run, jrr: np.ndarray, jcode: np.ndarray, codes: np.ndarray, n_codes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Exact (query, doc) matching of judgements against ranked positions, given doc codes for both."""
    flag = np.zeros(n_codes, dtype=bool)
    flag[jcode] = True
    cand = np.flatnonzero(flag[codes]) if len(codes) else np.zeros(0, dtype=np.int64)
    cand_rr = np.searchsorted(run.offsets, cand, side="right") - 1
    key_c = cand_rr * n_codes + codes[cand]
    key_j = jrr * n_codes + jcode
    order = np.argsort(key_j, kind="stable")
    key_sorted = key_j[order]
    m = np.minimum(np.searchsorted(key_sorted, key_c), len(key_sorted) - 1)
    hit = key_sorted[m] == key_c
    return order[m[hit]], cand[hit] - run.offsets[cand_rr[hit]]


def _locate_by_codes(run: Run, jrr: np.ndarray, jd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Judged ids -> the run's interned codes (binary search in its sorted vocabulary), then match."""
    vocab, codes = run.doc_codes()
    loc = np.minimum(np.searchsorted(vocab, jd), len(vocab) - 1)
    ok = np.flatnonzero(vocab[loc] == jd)
    which, ranks = _match(run, jrr[ok], loc[ok], codes, len(vocab))
    return ok[which], ranks


def _locate_by_keys(run: Run, jrr: np.ndarray, jd: IdColumn) -> tuple[np.ndarray, np.ndarray]:
    """Match judged ids against a run that carries a 64-bit key per ranked doc (runs read from TREC files).

    The run's doc ids stay raw bytes: judged ids get keys the same way (or bring the keys their own reader
    computed) and a blocked hash lookup finds them (see `data.keys`). Keys of ids up to 8 bytes are the ids
    themselves; any other match is confirmed by comparing the strings, so two ids that hash alike can never
    make a wrong hit.
    """
    assert run._doc_key is not None
    if jd.keys is not None:  # exact keys, from the judgements' own reader
        jkey, jexact = jd.keys, np.ones(len(jd), dtype=bool)
    else:
        jkey, jexact = key_strings(jd.strings().tolist())
    which, pos = lookup(run.offsets, run._doc_key, jrr, jkey)
    unsure = np.flatnonzero(~(jexact[which] & run._key_exact)) if len(which) else np.zeros(0, dtype=np.int64)
    if len(unsure):
        ok = np.ones(len(which), dtype=bool)
        ok[unsure] = run._docs_at(pos[unsure]) == jd[which[unsure]].strings()
        which, pos = which[ok], pos[ok]
    return which, pos - run.offsets[jrr[which]]


def _locate_by_scan(run: Run, jrr: np.ndarray, jd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One pass over the ranked docs, looking each up among the (few) judged ids only."""
    judged: dict[str, int] = {}
    jcode = np.fromiter((judged.setdefault(d, len(judged)) for d in jd.tolist()), dtype=np.int64, count=len(jd))
    codes = np.fromiter(
        map(judged.get, run.doc_ids.tolist(), repeat(len(judged))), dtype=np.int64, count=len(run.doc_ids)
    )
    # unjudged docs share the code len(judged), which no judgement carries
    return _match(run, jrr, jcode, codes, len(judged) + 1)
