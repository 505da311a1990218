"""The id judge: look a run's doc ids up in TREC-style qrels and build the GainMatrix.

Work grows with the number of judgements, not with the depth of the run: judged (query, doc) pairs
are located in the run by 64-bit keys (or by the mappings a run was built from), never by walking it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, repeat

import numpy as np

from retbench.data import Qrels, Run
from retbench.data.ids import key_strings, lookup
from retbench.data.run import _MappingIds
from retbench.metrics.gain import GainMatrix, _ideal_csr


def _flatten(
    table: Mapping[str, Mapping[str, int]], query_ids: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, doc id, grade) of every judgement of the given queries, built by C-level iteration."""
    empty: Mapping[str, int] = {}
    judged = [table.get(q, empty) for q in query_ids]
    lengths = np.fromiter(map(len, judged), dtype=np.int64, count=len(judged))
    total = int(lengths.sum())
    docs = np.fromiter(chain.from_iterable(judged), dtype=object, count=total)
    grades = np.fromiter(chain.from_iterable(j.values() for j in judged), dtype=np.float64, count=total)
    return np.repeat(np.arange(len(judged), dtype=np.int64), lengths), docs, grades


def _flatten_qrels(
    qrels: Mapping[str, Mapping[str, int]], query_ids: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, doc id, grade) of every positive judgement of the given queries."""
    rows, docs, grades = qrels.columns(query_ids) if isinstance(qrels, Qrels) else _flatten(qrels, query_ids)
    keep = grades > 0  # a plain mapping's grades stay as given (floats too); a Qrels' are integers
    return rows[keep], docs[keep], grades[keep].astype(np.float64)


def run_rows(run: Run, query_ids: Sequence[str]) -> np.ndarray:
    """The run's row of each query id (-1 where the run has no such query)."""
    if len(query_ids) == len(run.query_ids) and list(query_ids) == run.query_ids:  # the same queries, in order
        return np.arange(len(query_ids), dtype=np.int64)
    return np.fromiter(map(run._pos.get, query_ids, repeat(-1)), dtype=np.int64, count=len(query_ids))


def judge_qrels(
    run: Run,
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    query_ids: Sequence[str] | None = None,
    rows: np.ndarray | None = None,
) -> GainMatrix:
    """Grade each ranked document by the qrels: one row per query in `query_ids` (default: qrels order).

    Work is proportional to the number of judgements wherever the run allows it: a run built from
    `{qid: {doc: score}}` mappings answers "is this judged doc ranked, and with what score?" by one
    dict lookup, and its rank follows from a vectorized binary search over the query's sorted
    scores; a run read from a TREC file finds them by a hash lookup over its doc keys; a run whose doc
    codes are already interned needs one gather over those codes; any other run is scanned once,
    looking each ranked doc up among the judged ids only. A query absent from the run gets an empty
    row (length 0). `rows`: the run's row of each query id, when the caller has them already.
    """
    qids = list(qrels) if query_ids is None else list(query_ids)
    n = len(qids)
    jrow, jdocs, jgrade = _flatten_qrels(qrels, qids)
    ideal_offsets, ideal_grades = _ideal_csr(jrow, jgrade, n)

    run_row = run_rows(run, qids) if rows is None else rows
    run_len = np.diff(run.offsets)
    lengths = np.where(run_row >= 0, run_len[np.maximum(run_row, 0)] if len(run_len) else 0, 0).astype(np.int64)

    jrr = run_row[jrow] if len(jrow) else np.zeros(0, dtype=np.int64)
    sel = np.flatnonzero(jrr >= 0)
    jrr, jr, jd, jg = jrr[sel], jrow[sel], jdocs[sel], jgrade[sel]

    found = None
    if len(sel) == 0 or len(run.scores) == 0:
        found = (np.zeros(0, dtype=np.int64),) * 2
    elif run._maps is not None:
        found = _locate_by_maps(run, jrr, jd)
    if found is None and run._codes is None and run._doc_key is not None:
        found = _locate_by_keys(run, jrr, jd)
    if found is None:
        found = _locate_by_codes(run, jrr, jd) if run._codes is not None else _locate_by_scan(run, jrr, jd)
    which, ranks = found
    return GainMatrix.from_hits(qids, jr[which], ranks, jg[which], lengths, ideal_offsets, ideal_grades)


def _locate_by_maps(run: Run, jrr: np.ndarray, jd: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(judgement indices found in the run, their 0-based ranks) via the run's {doc: score} maps.

    Returns None when the maps no longer agree with the run (a mapping changed after the run was
    built); the caller then falls back to a scan, which reports the change.
    """
    maps = run._maps
    assert maps is not None and isinstance(run._lazy, _MappingIds)
    if not run._lazy.unchanged():
        return None
    # the score of every judged doc in its query's mapping, NaN when not ranked; for plain dicts the
    # lookups are driven from C (map over dict.get), other mappings go through their own .get
    owners = map(maps.__getitem__, jrr.tolist())
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

    def before(pos: np.ndarray, sel: np.ndarray) -> np.ndarray:
        """Whether the ranked doc at `pos` comes before judged doc `sel` in trec_eval order
        (score descending, then doc id descending)."""
        sm, sv = scores[pos], target[sel]
        out = sm > sv
        tie = np.flatnonzero(sm == sv)
        if len(tie) and len(tied_pos):
            # an equal score outside every tie group can only be the judged doc itself (not before it)
            k = np.minimum(np.searchsorted(tied_pos, pos[tie]), last)
            grouped = tied_pos[k] == pos[tie]
            if grouped.any():
                g = tie[grouped]
                out[g] = np.greater(tied_docs[k[grouped]], d[sel[g]])
        return out

    # branchless binary search, all judgements at once: rank = how many ranked docs come before
    rank = np.zeros(len(which), dtype=np.int64)
    longest = int((stops - starts).max())
    step = 1 << max(longest.bit_length() - 1, 0)
    while step:
        probe = starts + rank + (step - 1)
        sel = np.flatnonzero(probe < stops)
        rank[sel[before(probe[sel], sel)]] += step
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


def _locate_by_keys(run: Run, jrr: np.ndarray, jd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Match judged ids against a run that carries a 64-bit key per ranked doc (runs read from TREC files).

    The run's doc ids stay raw bytes: judged ids get keys the same way and a blocked hash lookup
    finds them (see `keys`). Keys of ids up to 8 bytes are the ids themselves; any other match is
    confirmed by comparing the strings, so two ids that hash alike can never make a wrong hit.
    """
    assert run._doc_key is not None
    jkey, jexact = key_strings(jd.tolist())
    which, pos = lookup(run.offsets, run._doc_key, jrr, jkey)
    unsure = np.flatnonzero(~(jexact[which] & run._key_exact)) if len(which) else np.zeros(0, dtype=np.int64)
    if len(unsure):
        ok = np.ones(len(which), dtype=bool)
        ok[unsure] = run._docs_at(pos[unsure]) == jd[which[unsure]]
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
