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

from collections.abc import Iterator, Sequence
from itertools import pairwise

import numpy as np

from retbench.data.threads import thread_map

__all__ = ["key_strings", "keys_from_bytes", "lookup", "may_repeat"]

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


def _pair_hash(key: np.ndarray, row_mix: np.ndarray, seed: int = 0) -> np.ndarray:
    """The 64-bit hash of (row, key) (`row_mix` from `_row_mix`), on one new array: (key ^ row_mix) times an
    odd constant, a bijection of key ^ row_mix, so equal hashes and equal keys mean equal rows. Each seed
    gives another function."""
    h = np.bitwise_xor(key, row_mix)
    with np.errstate(over="ignore"):
        h *= _GOLDEN + np.uint64(2 * seed)
    return h


def _top_bits(h: np.ndarray, bits: int) -> np.ndarray:
    """Multiply-shift's slot: the top `bits` of each hash, as a free int64 view (a slot is below 2^bits)."""
    return (h >> np.uint64(64 - bits)).view(np.int64)


def _slots(key: np.ndarray, row_mix: np.ndarray, seed: int, bits: int) -> np.ndarray:
    """Multiply-shift hashing of (row, key) into 2^bits slots; each seed gives another function."""
    h = _pair_hash(key, row_mix, seed)
    h >>= np.uint64(64 - bits)  # in place: no second array
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
            jh = _pair_hash(jkey, (srow[ja:jb] - a).astype(np.uint64) * _MIX)
        bits = max(8, (8 * (jb - ja) - 1).bit_length())  # at least 8 slots per wanted pair
        jslot = _top_bits(jh, bits)
        table = np.full(1 << bits, -1, dtype=np.int32)
        mine = np.arange(jb - ja, dtype=np.int32)
        table[jslot] = mine
        lost = np.flatnonzero(table[jslot] != mine)
        if len(lost):
            table[jslot[lost]] |= _MORE  # the slot's winner keeps its index; the mark sends hits to `lost`
        key = keys[lo:hi]
        h = _pair_hash(key, _row_mix(lens[a:b]))
        t = table[_top_bits(h, bits)]
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


# ranked ids per lookup block (its table is sized by the wanted pairs, not by these): fewer, longer NumPy
# calls than the duplicate check's blocks, which share out better over threads
_LOOKUP_BLOCK = 1 << 18
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
