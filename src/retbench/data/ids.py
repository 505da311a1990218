"""64-bit keys for id strings, and exact hash operations over rankings grouped by query.

Runs read from TREC files keep their doc ids as raw bytes (an Arrow array) and never turn 10M of
them into Python strings unless something asks: duplicate detection and judging work on one
uint64 key per ranked id instead.

A key is the id's bytes read as a little-endian integer when the id has at most 8 bytes and no NUL
byte (then equal keys mean equal ids: the key is *exact*), otherwise a hash of the id's 8-byte
words (equal ids still give equal keys; callers compare the strings of the rare equal keys that
are not exact). Keys are built with a few vectorized passes over the id bytes, not a Python call
per id.

Duplicate detection and (query, key) lookups are hash-table scatters and gathers done one block of
whole queries at a time, with a table that fits in the CPU cache, which makes the random accesses of a
hash table cheap in NumPy (ten to twenty times cheaper than one table for all 10M): the duplicate check's
table holds ~64k ranked ids, the lookup's only the pairs sought among ~256k ranked ids (fewer, longer
NumPy calls, which share out better over threads).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, pairwise
from typing import Any

import numpy as np

from retbench.data.threads import thread_map

__all__ = [
    "answer_problem",
    "first_bad_id",
    "id_problem",
    "key_strings",
    "keys_from_bytes",
    "lookup",
    "may_repeat",
    "python_mapping_problem",
    "python_value_problem",
    "rankings_problem",
    "score_problem",
    "shown",
]

# What an id may not contain: whitespace of any kind (trec_eval and str.split() cut there, and a newline
# would forge a TREC line) and control characters. Ids are non-empty strings; integers are accepted as
# their decimal text (JSON sources often write them so), booleans, null and containers are not.
_BAD_ID_CHAR = re.compile(r"[\s\x00-\x1f\x7f]")


def shown(value: object, width: int = 40) -> str:
    """`repr(value)` cut to `width` characters for an error message; an integer too long for Python to
    print (over 4,300 digits) is described by its size instead of raising while the error is built."""
    if isinstance(value, int) and value.bit_length() > 4 * width:
        return f"an integer of {len(hex(value)) - 2} hex digits"
    return f"{value!r:.{width}}"


def id_problem(value: object) -> str | None:
    """Why `value` cannot be a query or document id (None when it can)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return f"id must be a string, got {type(value).__name__} {shown(value)}"
    if isinstance(value, int) and value.bit_length() > 160:
        return f"id must be a string, got {shown(value)}"
    text = str(value)
    if not text:
        return "id is empty"
    bad = _BAD_ID_CHAR.search(text)
    if bad:
        return f"id {text!r:.60} contains {bad.group(0)!r} (ids may not hold whitespace or control characters)"
    return None


def first_bad_id(ids: Iterable[str]) -> tuple[int, str] | None:
    """(position, reason) of the first unusable id; one regex pass over all ids when they are fine."""
    ids = ids if isinstance(ids, list) else list(ids)
    if all(type(i) is str for i in ids) and all(ids) and not _BAD_ID_CHAR.search("".join(ids)):
        return None
    for n, value in enumerate(ids):
        reason = id_problem(value)
        if reason:
            return n, reason
    return None  # pragma: no cover - the fast check found a problem one of the ids must have


def score_problem(value: Any) -> str | None:
    """Why `value` cannot be a ranking score (None when it can): the one check behind run files, backends'
    answers, golden-set outputs and Python runs. A number or its text; never a boolean, null, NaN or infinity."""
    if isinstance(value, bool) or value is None:
        return f"score must be a number, got {value!r}"
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return f"score must be a number, got {shown(value)}"
    if not math.isfinite(number):
        return f"score must be finite, got {shown(value)}"
    return None


def answer_problem(ranking: Sequence[tuple[object, object]]) -> str | None:
    """Why a backend's ranking cannot be recorded as an answer: a bad doc id or a non-finite score."""
    try:  # fast path: string ids and finite float scores, checked with one regex and one array pass
        docs, scores = zip(*ranking, strict=True)
        if (
            all(type(d) is str and d for d in docs)
            and not _BAD_ID_CHAR.search("".join(docs))
            and np.isfinite(np.asarray(scores, dtype=np.float64)).all()
        ):
            return None
    except (TypeError, ValueError):
        pass
    for rank, item in enumerate(ranking, 1):
        try:
            doc, score = item
        except (TypeError, ValueError):
            return f"rank {rank}: expected (doc id, score), got {item!r:.60}"
        reason = id_problem(doc)
        if reason:
            return f"rank {rank}: {reason}"
        reason = score_problem(score)
        if reason:
            return f"rank {rank}: {reason}"
    return None


def plain_rankings_fine(rankings: list[dict[Any, Any]], scores: np.ndarray | None = None) -> bool:
    """True when every doc id of these dicts is usable text and every score a finite number.

    Every pass is in C. The ids are joined with spaces one ranking at a time (a non-text id stops the
    join), so each id object is read once, while its ranking's ids are in cache, and the rankings' texts
    are then joined and checked as one: since an id may hold neither a space nor a control character,
    the text is printable with exactly one space between ids and none doubled or at an end (an empty id
    shows as a doubled space). ASCII text is checked as bytes (every byte from 32 to 126), other text by
    `str.isprintable`. The scores are the array already read (None, text or a container there stops
    `np.fromiter`), checked finite. Anything doubtful returns False and the caller's slow walk names the
    entry. A bool score reads as 0 or 1 here, as NumPy reads it.
    """
    try:
        joined = " ".join(filter(None, map(" ".join, rankings)))  # (an empty ranking adds no separator)
    except TypeError:
        return False
    n = sum(map(len, rankings))
    if n and not _spaced_ids(joined, n):
        return False  # a space, a control character or an empty id, or Unicode isprintable refuses: the walk decides
    if scores is None:
        try:
            scores = np.fromiter(chain.from_iterable(map(dict.values, rankings)), dtype=np.float64, count=n)
        except (TypeError, ValueError, OverflowError):
            return False
    return bool(np.isfinite(scores).all())


def _spaced_ids(joined: str, n: int) -> bool:
    """Whether `joined` is n printable, non-empty ids separated by single spaces."""
    if not joined or joined[:1] == " " or joined[-1:] == " ":
        return False  # one empty id, or an empty id at an end
    if joined.isascii():  # as bytes: every byte from 32 to 126, n - 1 spaces, none doubled
        data = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
        if data.min() < 32 or data.max() > 126 or np.count_nonzero(data == 32) != n - 1:
            return False
        return not _double_space(data)
    if joined.count(" ") != n - 1 or "  " in joined:
        return False
    return joined.isprintable()


def _double_space(data: np.ndarray) -> bool:
    """Whether two space bytes follow each other: the bytes read as 16-bit pairs from an even and from an
    odd start, each compared with two spaces (two array passes; `str.__contains__` is 3x slower here)."""
    for start in (0, 1):
        pairs = data[start : start + (len(data) - start) // 2 * 2].view(np.uint16)
        if bool((pairs == 0x2020).any()):
            return True
    return False


def rankings_problem(results: Mapping[Any, Any]) -> tuple[str, str] | None:
    """(field, reason) of the first thing in `{qid: {doc: score}}` (or `{qid: [(doc, score), ...]}`) that a run
    file could not hold -- an id that is not text, a score that is null, NaN or infinite -- or None.

    One pass over every id and score when all is well (a join and an array); the slow walk that names
    the entry (`run[query][doc]`) runs only when something is wrong.
    """
    bad = first_bad_id(list(results))
    if bad is not None:
        return "run", f"query {bad[1]}"
    rankings = list(results.values())
    if all(type(r) is dict for r in rankings) and plain_rankings_fine(rankings):
        return None
    for qid, ranking in results.items():
        if not isinstance(ranking, Mapping):
            if isinstance(ranking, (str, bytes)) or not isinstance(ranking, Sequence):
                kind = type(ranking).__name__
                return "run", f"the ranking of query {shown(qid)} must map doc id -> score, got {kind}"
            problem = answer_problem(list(ranking))
            if problem:
                return f"run[{shown(qid)}]", problem
            continue
        for doc, score in ranking.items():
            problem = id_problem(doc)
            if problem:
                return f"run[{shown(qid)}]", f"document {problem}"
            problem = score_problem(score)
            if problem:
                return f"run[{shown(qid)}][{shown(doc)}]", problem
    return None


# What a Python caller may pass as a score or grade: numbers as Python or NumPy hold them. A file's text is
# parsed ("0.5" in a run file is a number); a Python value is taken as given, so text and booleans are not.
_NUMBER_TYPES = (int, float, np.integer, np.floating)


def refuse_rankings_problems(results: Mapping[Any, Any]) -> None:
    """Hold `{qid: {doc: score}}` to a run file's rules: the first id that is not text or score that is null,
    NaN or infinite is an InputError naming `run[query][doc]` (the slow walk, run when a check failed)."""
    problem = rankings_problem(results)
    if problem is not None:
        from retbench.errors import InputError

        raise InputError(problem[1], field=problem[0])


def python_value_problem(value: object, what: str) -> str | None:
    """Why a Python value cannot be a `what` ("score" or "grade"): None when it is an int or a float (or
    a NumPy one); a bool, a string or None is refused (its finiteness and integrality are checked later,
    by the same rules as a file's)."""
    must = f"{what} must be {'an integer' if what == 'grade' else 'a number'}, got"
    if value is None:
        return f"{must} None"
    if isinstance(value, (bool, np.bool_)):
        return f"{must} {value!r} (a boolean)"
    if isinstance(value, (str, bytes)):
        return f"{must} {shown(value)} (text)"
    if not isinstance(value, _NUMBER_TYPES):
        return f"{must} {type(value).__name__} {shown(value)}"
    return None


def python_mapping_problem(results: Mapping[Any, Any], what: str) -> tuple[str, str] | None:
    """(field, reason) of the first id or value a Python `{qid: {doc: value}}` may not hold, or None.

    `what` is "score" (a run; a ranking may also be a list of (doc, value) pairs) or "grade" (qrels).
    Ids must be usable non-empty text (`id_problem`) and values numbers (`python_value_problem`): a doc id
    "" would otherwise be judged and scored as a document. When all is well this is a few C-speed passes
    (a type set, a join); the walk that names the entry runs only when something is wrong.
    """
    name = "run" if what == "score" else "qrels"
    bad = first_bad_id(list(results))
    if bad is not None:
        return name, f"query {bad[1]}"
    rankings = list(results.values())
    if all(type(r) is dict for r in rankings):
        types = set(map(type, chain.from_iterable(map(dict.values, rankings))))
        numbers = all(issubclass(t, _NUMBER_TYPES) and not issubclass(t, (bool, np.bool_)) for t in types)
        if numbers and first_bad_id(list(chain.from_iterable(rankings))) is None:
            return None
    for qid, ranking in results.items():
        where = f"{name}[{shown(qid)}]"
        if not isinstance(ranking, Mapping):
            if what != "score" or isinstance(ranking, (str, bytes)) or not isinstance(ranking, Sequence):
                return name, f"the entry of query {shown(qid)} must map doc id -> {what}, got {type(ranking).__name__}"
            problem = answer_problem(list(ranking))  # ids and pair shapes, as a backend's answer
            for rank, (_, value) in enumerate([] if problem else ranking, 1):
                value_problem = python_value_problem(value, what)
                if value_problem:
                    problem = f"rank {rank}: {value_problem}"
                    break
            if problem:
                return where, problem
            continue
        for doc, value in ranking.items():
            problem = id_problem(doc)
            if problem:
                return where, f"document {problem}"
            problem = python_value_problem(value, what)
            if problem:
                return f"{where}[{shown(doc)}]", problem
    return None


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: Fibonacci hashing
_MIX = np.uint64(0xBF58476D1CE4E5B9)  # splitmix64 multipliers
_MIX2 = np.uint64(0x94D049BB133111EB)
_LOW_BYTES = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_BLOCK = 1 << 16  # ranked ids per block: the block's table (4x as many int32 slots) stays in cache


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: every input bit moves every output bit."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * _MIX
        h = (h ^ (h >> np.uint64(27))) * _MIX2
    return h ^ (h >> np.uint64(31))


def keys_from_bytes(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, bool]:
    """(key of each id `data[offsets[i]:offsets[i + 1]]`, whether every key is exact).

    `data` is a uint8 buffer, `offsets` non-decreasing int positions into it (Arrow's layout).
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    if n <= 0:
        return np.zeros(0, dtype=np.uint64), True
    lens = np.diff(offsets)
    longest = int(lens.max())
    lo, hi = int(offsets[0]), int(offsets[-1])
    used = np.zeros(hi - lo + 8, dtype=np.uint8)  # 8 spare bytes: a word may start at any id byte
    used[: hi - lo] = data[lo:hi]
    # element i of this view is the 8 bytes starting at byte i (unaligned loads, one gather per word)
    at = np.ndarray(shape=(hi - lo + 1,), dtype="<u8", buffer=used, strides=(1,))
    starts = offsets[:-1] - lo
    key = at[starts]
    if int(lens.min()) < 8:
        key &= _LOW_BYTES[np.minimum(lens, 8)]
    with np.errstate(over="ignore"):
        for w in range(1, (longest + 7) // 8):  # ids longer than 8 bytes fold in their further words
            rest = lens - 8 * w
            longer = np.flatnonzero(rest > 0)
            word = at[starts[longer] + 8 * w] & _LOW_BYTES[np.minimum(rest[longer], 8)]
            key[longer] = _mix(key[longer] ^ _mix(word + np.uint64(w)))
    exact = longest <= 8 and (hi == lo or int(used[: hi - lo].min()) > 0)
    return key, exact


def key_strings(ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(key of each id given as a Python string, per-id exactness) — the keys of their UTF-8 bytes.

    ASCII ids (the usual case) are joined and encoded in one C pass, their byte lengths being their
    lengths; other text is encoded one id at a time. (Arrow's `pa.array` would also encode in one pass,
    but it imports pandas whenever pandas is installed: 0.15 s and its memory on a path that needs neither.)
    """
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    text = "".join(ids)
    if text.isascii():
        blob = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    else:
        encoded = [d.encode("utf-8") for d in ids]
        lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    key, _ = keys_from_bytes(blob, offsets)
    lens = np.diff(offsets)
    exact = lens <= 8
    if len(blob) and int(blob.min()) == 0:  # an id holding a NUL byte has an inexact key
        row = np.searchsorted(offsets, np.flatnonzero(blob == 0), side="right") - 1
        exact[row] = False
    return key, exact


def _blocks(offsets: np.ndarray, size: int = _BLOCK) -> Iterator[tuple[int, int]]:
    """Runs of consecutive queries [a, b) holding about `size` ranked ids each (a longer query alone)."""
    n_q = len(offsets) - 1
    total = int(offsets[-1]) if n_q >= 0 else 0
    cuts = np.searchsorted(offsets, np.arange(size, total, size), side="right") - 1
    bounds = np.unique(np.concatenate([[0], cuts, [n_q]]).astype(np.int64)).tolist()
    for a, b in pairwise(bounds):
        if b > a:
            yield a, b


def _row_mix(lens: np.ndarray) -> np.ndarray:
    """Each ranked position's row (0 for the first query given) times a mixing constant: the row's share
    of the (row, key) hash, computed once per row and repeated, not once per position."""
    with np.errstate(over="ignore"):
        return np.repeat(np.arange(len(lens), dtype=np.uint64) * _MIX, lens)


def _slots(key: np.ndarray, row_mix: np.ndarray, seed: int, bits: int) -> np.ndarray:
    """Multiply-shift hashing of (row, key) into 2^bits slots (`row_mix` from `_row_mix`); each seed gives
    another function. The arithmetic runs in place on one new array, and the final cast is a free view
    (a slot is below 2^bits, so its int64 reading equals its uint64 one)."""
    h = np.bitwise_xor(key, row_mix)
    with np.errstate(over="ignore"):
        h *= _GOLDEN + np.uint64(2 * seed)
    h >>= np.uint64(64 - bits)
    return h.view(np.int64)


def _bits(m: int) -> int:
    return max(8, int(m * 4 - 1).bit_length())


def may_repeat(offsets: np.ndarray, keys: np.ndarray) -> bool:
    """Whether some query may hold one key twice. False is exact; True means "equal keys found"
    (a repeated id, or, for keys that are not exact, possibly two ids that hash alike).

    Blocks of queries are checked on one thread per CPU (`data.threads`) once there are several."""
    lens = np.diff(offsets)
    numbers = np.arange(min(_BLOCK, len(keys)) if len(keys) else 0, dtype=np.int32)

    def block(bounds: tuple[int, int]) -> bool:
        a, b = bounds
        lo, hi = int(offsets[a]), int(offsets[b])
        if hi - lo < 2:
            return False
        key, row_mix = keys[lo:hi], _row_mix(lens[a:b])
        bits = _bits(hi - lo)
        table = np.empty(1 << bits, dtype=np.int32)
        k, r = key, row_mix  # the first round takes the whole block as it lies: no gathers
        cand: np.ndarray | None = None
        seed = 0
        while len(k) > 1:
            slot = _slots(k, r, seed, bits)
            mine = numbers[: len(k)] if len(k) <= len(numbers) else np.arange(len(k), dtype=np.int32)
            table[slot] = mine
            winner = table[slot]
            lost = np.flatnonzero(winner != mine)
            if len(lost) == 0:
                break
            w = winner[lost]
            if np.any((k[lost] == k[w]) & (r[lost] == r[w])):
                return True
            # the losers may still equal each other (three or more in one slot): retry them alone
            cand = lost if cand is None else cand[lost]
            k, r = key[cand], row_mix[cand]
            seed += 1
        return False

    blocks = list(_blocks(offsets))
    return any(thread_map(block, blocks, parallel=len(blocks) > 2))


def lookup(
    offsets: np.ndarray, keys: np.ndarray, rows: np.ndarray, wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Where each wanted (row, key) sits in a ranking: (index into `wanted`, absolute position) pairs.

    `offsets`/`keys` are the rankings (CSR by row), `rows`/`wanted` the (row, key) pairs sought.
    Every position holding the wanted key in that row is returned, so callers that need exactness
    for keys that are not exact compare the strings of the pairs returned.

    One block of queries at a time (about `_LOOKUP_BLOCK` ranked ids), the block's wanted pairs go into a
    table sized by their count, keyed by the 64-bit hash of (row, key); every ranked id of the block is
    hashed the same way and looked up. A hit is a match when the hashes and the keys are equal (the hash
    is a bijection of key ^ row * odd, so equal keys and hashes mean equal rows). Wanted pairs that lost
    their slot to another are matched by a sorted search, for the ranked ids whose slot is marked.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0 or len(keys) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    srow, skey = rows[order], np.asarray(wanted, dtype=np.uint64)[order]
    lens = np.diff(offsets)

    def block(bounds: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        a, b = bounds
        ja, jb = np.searchsorted(srow, [a, b]).tolist()
        if ja == jb:
            return _NONE
        lo, hi = int(offsets[a]), int(offsets[b])
        jkey = skey[ja:jb]
        with np.errstate(over="ignore"):
            jh = np.bitwise_xor(jkey, (srow[ja:jb] - a).astype(np.uint64) * _MIX)
            jh *= _GOLDEN
        bits = max(8, (8 * (jb - ja) - 1).bit_length())  # at least 8 slots per wanted pair
        shift = np.uint64(64 - bits)
        jslot = (jh >> shift).view(np.int64)
        table = np.full(1 << bits, -1, dtype=np.int32)
        mine = np.arange(jb - ja, dtype=np.int32)
        table[jslot] = mine
        lost = np.flatnonzero(table[jslot] != mine)
        if len(lost):
            table[jslot[lost]] |= _MORE  # the slot's winner keeps its index; the mark sends hits to `lost`
        key = keys[lo:hi]
        with np.errstate(over="ignore"):
            h = np.bitwise_xor(key, _row_mix(lens[a:b]))
            h *= _GOLDEN
        t = table[(h >> shift).view(np.int64)]
        pos = np.flatnonzero(t >= 0)
        tj = t[pos]
        j = tj & _INDEX
        same = (h[pos] == jh[j]) & (key[pos] == jkey[j])
        found_j, found_p = [j[same]], [pos[same]]
        if len(lost):
            marked = pos[(tj & _MORE) != 0]
            lj, lp = _equal_hashes(jh[lost], h[marked])
            lj, lp = lost[lj], marked[lp]
            ok = key[lp] == jkey[lj]
            found_j.append(lj[ok])
            found_p.append(lp[ok])
        return order[ja + np.concatenate(found_j)], lo + np.concatenate(found_p)

    blocks = list(_blocks(offsets, _LOOKUP_BLOCK))
    found = [pair for pair in thread_map(block, blocks, parallel=len(blocks) > 2) if len(pair[0])]
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return (
        np.concatenate([j for j, _ in found]).astype(np.int64),
        np.concatenate([p for _, p in found]).astype(np.int64),
    )


_LOOKUP_BLOCK = (
    1 << 18
)  # ranked ids per lookup block (its table is sized by the wanted pairs, not by these): fewer, longer NumPy calls share out better over threads
_MORE = np.int32(1 << 30)  # a table slot's mark: other wanted pairs hashed to this slot too
_INDEX = np.int32((1 << 30) - 1)
_NONE = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def _equal_hashes(wanted: np.ndarray, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (i, p) with wanted[i] == seen[p]: a sorted search, each match range expanded."""
    order = np.argsort(wanted, kind="stable")
    sorted_hashes = wanted[order]
    left = np.searchsorted(sorted_hashes, seen, side="left")
    count = np.searchsorted(sorted_hashes, seen, side="right") - left
    p = np.repeat(np.arange(len(seen), dtype=np.int64), count)
    first = np.repeat(left - (np.cumsum(count) - count), count)
    return order[first + np.arange(len(p), dtype=np.int64)], p
