"""Doc keys and the blocked hash operations judging and de-duplication rely on, against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retbench.data import ids as K
from retbench.data import keys as KEYS

ids = st.text(alphabet=st.sampled_from("ab\x00é-9"), min_size=0, max_size=20)


@settings(max_examples=300, deadline=None)
@given(st.lists(ids, max_size=40))
def test_keys_of_equal_ids_are_equal_and_exact_keys_tell_ids_apart(values):
    keys, exact = KEYS.key_strings(values)
    assert len(keys) == len(values) == len(exact)
    for i, a in enumerate(values):
        assert exact[i] == (len(a.encode()) <= 8 and "\x00" not in a)
        for j, b in enumerate(values):
            if a == b:
                assert keys[i] == keys[j]
            elif exact[i] and exact[j]:
                assert keys[i] != keys[j]


def test_keys_from_a_buffer_do_not_depend_on_the_neighbours_or_the_longest_id():
    # the same id keyed alone and amid longer ids (more words folded for them) gets one key
    alone, _ = KEYS.key_strings(["short", "exactly8", "nine-byte", "a-much-longer-identifier"])
    mixed, exact = KEYS.key_strings(["x" * 40, "short", "y", "exactly8", "nine-byte", "a-much-longer-identifier"])
    assert alone.tolist() == mixed[[1, 3, 4, 5]].tolist()
    assert exact.tolist() == [False, True, True, True, False, False]
    # bytes read straight from a shared buffer with offsets (the Arrow layout), not starting at 0
    blob = b"__shortexactly8nine-byte"
    offsets = np.array([2, 7, 15, 24])
    keys, all_exact = KEYS.keys_from_bytes(np.frombuffer(blob, dtype=np.uint8), offsets)
    assert keys.tolist() == alone[:3].tolist() and not all_exact


def _csr(rng: np.random.Generator, n_rows: int, vocab: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    lens = rng.integers(0, max_len + 1, n_rows)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    return offsets, rng.integers(0, vocab, int(offsets[-1])).astype(np.uint64)


def test_may_repeat_is_exact_against_brute_force():
    rng = np.random.default_rng(0)
    for trial in range(300):
        # a tiny key space packs many keys into one slot (three-way collisions, several rounds)
        offsets, keys = _csr(rng, int(rng.integers(0, 30)), int(rng.choice([3, 50, 2**40])), int(rng.choice([5, 40])))
        if trial % 2:  # rankings without repeats, the common case
            keys = np.concatenate(
                [rng.permutation(64)[: b - a] * 7919 for a, b in itertools.pairwise(offsets)] or [np.zeros(0)]
            ).astype(np.uint64)
        brute = any(len(set(keys[a:b].tolist())) < b - a for a, b in itertools.pairwise(offsets))
        assert KEYS.may_repeat(offsets, keys) == brute


def test_may_repeat_across_blocks():
    # 200k ids in 2,000 queries span several blocks; one repeat in the last query is found
    offsets = np.arange(0, 200_001, 100)
    keys = np.arange(200_000, dtype=np.uint64) % np.uint64(100)  # the same 100 keys in every query
    assert not KEYS.may_repeat(offsets, keys)
    keys[-1] = keys[-50]
    assert KEYS.may_repeat(offsets, keys)


def test_lookup_finds_exactly_the_brute_force_pairs():
    rng = np.random.default_rng(1)
    for _ in range(200):
        offsets, keys = _csr(rng, int(rng.integers(1, 25)), int(rng.choice([4, 60, 2**40])), int(rng.choice([6, 50])))
        n_rows = len(offsets) - 1
        m = int(rng.integers(0, 40))
        rows = rng.integers(-0, n_rows, m)
        wanted = rng.integers(0, 60, m).astype(np.uint64)
        if len(keys) and m:  # make some of them present
            pick = rng.integers(0, len(keys), m // 2)
            rows[: m // 2] = np.searchsorted(offsets, pick, side="right") - 1
            wanted[: m // 2] = keys[pick]
        j, p = KEYS.lookup(offsets, keys, rows, wanted)
        got = sorted(zip(j.tolist(), p.tolist(), strict=True))
        brute = sorted(
            (i, pos)
            for i in range(m)
            for pos in range(int(offsets[rows[i]]), int(offsets[rows[i] + 1]))
            if keys[pos] == wanted[i]
        )
        assert got == brute


def test_lookup_over_many_blocks_with_crowded_slots():
    # 300k ranked ids and 3,000 wanted pairs per block-sized stretch: slots shared by wanted pairs occur
    rng = np.random.default_rng(2)
    offsets = np.arange(0, 300_001, 100)
    keys = rng.integers(0, 2**63, 300_000).astype(np.uint64)
    rows = np.repeat(np.arange(3000), 5)
    pos = offsets[rows] + rng.integers(0, 100, len(rows))
    wanted = keys[pos].copy()
    wanted[::7] ^= np.uint64(1)  # some are absent
    j, p = KEYS.lookup(offsets, keys, rows, wanted)
    present = np.flatnonzero(keys[pos] == wanted)
    assert sorted(j.tolist()) == present.tolist()
    assert (p[np.argsort(j)] == pos[present]).all()


@pytest.mark.parametrize("threads", ["1", "4"])
def test_lookup_across_blocks_with_repeats_equals_a_dict_of_positions(monkeypatch, threads):
    """Wanted pairs asked twice, a key ranked twice in one row, one key ranked and wanted in many rows,
    and blocks holding many wanted pairs (so many share a table slot): every (wanted index, position)
    with an equal (row, key), and nothing else, on one thread and on several."""
    monkeypatch.setenv("RETBENCH_THREADS", threads)
    rng = np.random.default_rng(5)
    lens = rng.integers(0, 200, 3000)
    offsets = np.concatenate([[0], np.cumsum(lens)])
    keys = rng.integers(0, 300, int(offsets[-1])).astype(np.uint64)  # repeats within rows
    keys[::97] = np.uint64(7)  # one key in many rows
    where: dict[tuple[int, int], list[int]] = {}
    for row in range(len(lens)):
        for pos in range(int(offsets[row]), int(offsets[row + 1])):
            where.setdefault((row, int(keys[pos])), []).append(pos)
    rows = rng.integers(0, len(lens), 60_000)
    wanted = rng.integers(0, 320, 60_000).astype(np.uint64)
    wanted[::5] = np.uint64(7)
    rows[1::9], wanted[1::9] = rows[::9][: len(rows[1::9])], wanted[::9][: len(rows[1::9])]  # asked twice
    j, p = KEYS.lookup(offsets, keys, rows, wanted)
    got = sorted(zip(j.tolist(), p.tolist(), strict=True))
    brute = sorted(
        (i, pos)
        for i, (r, k) in enumerate(zip(rows.tolist(), wanted.tolist(), strict=True))
        for pos in where.get((r, k), [])
    )
    assert got == brute and len(brute) > 10_000


def _every_entry_fine(rankings: list[dict[str, float]]) -> bool:
    return all(K.id_problem(d) is None and K.score_problem(s) is None for r in rankings for d, s in r.items())


ascii_ids = st.text(alphabet=st.sampled_from("ab-9 \t\x01\x7f~"), min_size=0, max_size=6)
scores = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.dictionaries(ascii_ids, scores, max_size=6), max_size=6))
def test_the_one_pass_check_of_ascii_rankings_agrees_with_the_entry_by_entry_walk(rankings):
    assert K.plain_rankings_fine(rankings) == _every_entry_fine(rankings)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=4), st.floats(-1e9, 1e9), max_size=5), max_size=5))
def test_the_one_pass_check_never_passes_a_unicode_ranking_the_walk_refuses(rankings):
    if K.plain_rankings_fine(rankings):
        assert _every_entry_fine(rankings)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(ascii_ids, scores, max_size=6), max_size=12), st.integers(1, 4))
def test_the_check_in_blocks_of_rankings_agrees_with_the_entry_by_entry_walk(rankings, per_block):
    """A bad id in any block, and an empty id anywhere, is found however the rankings fall into blocks."""
    saved = K.IDS_PER_BLOCK
    K.IDS_PER_BLOCK = per_block  # a handful of ids per block: many blocks, and a bad id in a late one
    try:
        assert K.plain_rankings_fine(rankings) == _every_entry_fine(rankings)
    finally:
        K.IDS_PER_BLOCK = saved


def test_a_ranking_whose_only_id_is_empty_is_not_passed():
    assert not K.plain_rankings_fine([{"": 1.0}])
    assert not K.plain_rankings_fine([{"a": 1.0}, {"": 2.0}])
    assert K.plain_rankings_fine([{"a": 1.0}, {}, {"b": 2.0}])
