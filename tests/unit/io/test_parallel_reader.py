"""Run and qrels files read in parts on several threads: the same Run, Qrels and errors as the line reader.

The parts are forced small (`_PART_BYTES`) and many (`cpus`), so files of a few hundred KiB cross many part
boundaries: queries split between parts, a query's lines in several places, a duplicate on each side of a cut.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import retbench.io.trec_columns as trec_columns
from retbench.data import keys as K
from retbench.data.threads import cpus, thread_map
from retbench.errors import InputError
from retbench.io.trec import _read_qrels_lines, _read_run_lines, read_qrels, read_run


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of 16 KiB, up to 7 of them, whatever this machine's CPU count."""
    monkeypatch.setattr(trec_columns, "_PART_BYTES", 1 << 14)
    monkeypatch.setattr(trec_columns, "cpus", lambda: 7)


def _run_text(rng: random.Random, n_lines: int) -> str:
    queries = [f"q{i}" for i in range(40)] + ["naïve-q"]
    docs = [f"d{i}" for i in range(300)] + ["doc-with-a-rather-long-identifier-0001", "é-doc", "日本"]
    lines = []
    for i in range(n_lines):
        q = queries[(i // 50 + rng.randrange(3)) % len(queries)]  # mostly runs of one query, some interleaved
        lines.append(f"{q} Q0 {rng.choice(docs)} {i % 1000 + 1} {rng.choice([repr(rng.random()), '1', '-2.5e-3'])} t")
    return "\n".join(lines) + "\n"


def test_a_run_read_in_parts_equals_the_line_reader(tmp_path, small_parts):
    rng = random.Random(3)
    path = tmp_path / "run.trec"
    for n_lines in (3_000, 9_000):
        path.write_text(_run_text(rng, n_lines), encoding="utf-8")
        assert len(trec_columns._line_parts(trec_columns._in_memory(str(path)))) > 3  # the reader really cut the file
        fast, slow = read_run(path), _read_run_lines(path, None)
        assert fast.query_ids == slow.query_ids
        assert fast.offsets.tolist() == slow.offsets.tolist()
        assert fast.doc_ids.tolist() == slow.doc_ids.tolist()
        assert fast.scores.tolist() == slow.scores.tolist()
        assert fast.n_duplicates == slow.n_duplicates > 0


def test_qrels_read_in_parts_equal_the_line_reader_and_a_repeated_judgement_is_refused_naming_both_lines(
    tmp_path, small_parts
):
    rng = random.Random(4)
    pairs = rng.sample([(q, d) for q in range(30) for d in range(300)], 8_000)
    lines = [f"q{q} 0 d{d} {rng.randrange(-1, 4)}" for q, d in pairs]
    path = tmp_path / "qrels.trec"
    path.write_text("\n".join(lines) + "\n")
    assert len(trec_columns._line_parts(trec_columns._in_memory(str(path)))) > 3
    assert read_qrels(path).to_dict() == _read_qrels_lines(path).to_dict()
    q, d = pairs[10]
    path.write_text("\n".join([*lines, f"q{q} 0 d{d} 3"]) + "\n")  # as trec_eval, even an equal grade is refused
    with pytest.raises(InputError) as err:
        read_qrels(path)
    assert err.value.line == 8_001 and "(lines 11 and 8001)" in str(err.value) and f"'d{d}'" in str(err.value)


def test_a_bad_line_in_a_later_part_is_named_by_its_line_number(tmp_path, small_parts):
    rng = random.Random(5)
    lines = _run_text(rng, 6_000).splitlines()
    lines[4_321] = lines[4_321].replace(" t", " \x0bt")  # a vertical tab: str.split() cuts there
    lines[5_000] = "q1 Q0 d1 1 inf t"
    path = tmp_path / "run.trec"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_run(path)
    assert f"{path}:5001" in str(err.value) and "finite" in str(err.value)


def test_parts_are_whole_lines_and_join_back_to_the_file(tmp_path, small_parts):
    long_line = "q1 Q0 " + "x" * 100_000 + " 1 1.0 t\n"  # longer than the window a cut searches for a line end
    text = "".join(f"q{i} Q0 d{i} 1 1.0 t\n" for i in range(3_000)) + long_line + "q2 Q0 d 1 2 t"
    path = tmp_path / "run.trec"
    path.write_text(text)
    parts = trec_columns._line_parts(trec_columns._in_memory(str(path)))
    assert b"".join(p.to_pybytes() for p in parts) == text.encode()
    assert all(p.to_pybytes().endswith(b"\n") for p in parts[:-1]) and all(len(p) for p in parts)
    assert read_run(path).doc_ids.tolist() == _read_run_lines(path, None).doc_ids.tolist()


def test_retbench_threads_caps_the_threads_and_results_keep_their_order(monkeypatch):
    monkeypatch.setenv("RETBENCH_THREADS", "1")
    assert cpus() == 1
    monkeypatch.setenv("RETBENCH_THREADS", "3")
    assert 1 <= cpus() <= 3
    assert thread_map(lambda x: x * x, range(50)) == [x * x for x in range(50)]

    def fails(x: int) -> int:
        if x == 7:
            raise ValueError("seven")
        return x

    with pytest.raises(ValueError, match="seven"):
        thread_map(fails, range(20))


def test_blocked_hash_passes_give_the_same_answers_on_one_thread_and_on_several(monkeypatch):
    rng = np.random.default_rng(9)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(1, 400, 2_000))]).astype(np.int64)  # several blocks
    keys = rng.integers(0, 2**40, int(offsets[-1])).astype(np.uint64)
    rows = rng.integers(0, 2_000, 5_000)
    wanted = keys[offsets[rows] + rng.integers(0, 1, 5_000)]
    wanted[::3] = rng.integers(0, 2**40, len(wanted[::3])).astype(np.uint64)  # some not ranked
    answers = {}
    for threads in ("1", "4"):
        monkeypatch.setenv("RETBENCH_THREADS", threads)
        which, pos = K.lookup(offsets, keys, rows, wanted)
        order = np.lexsort((pos, which))
        answers[threads] = (which[order].tolist(), pos[order].tolist(), K.may_repeat(offsets, keys))
    assert answers["1"] == answers["4"]
    assert len(answers["1"][0]) >= 3_000


def _binary_chunk(pa, ids: list[bytes]):
    """An Arrow binary array made from its buffers, as the CSV reader makes them: `pa.array` on a Python list
    would import pandas (Arrow checks list items for pandas types), which the unit tier never loads."""
    offsets = np.cumsum([0, *map(len, ids)]).astype(np.int32)
    return pa.Array.from_buffers(
        pa.binary(), len(ids), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(ids))]
    )


def test_chunk_keys_shortcut_equals_the_general_keys():
    """Ids of at most 8 bytes are keyed by Arrow's NUL padding; the keys and exactness equal
    `keys_from_bytes` on every chunk, sliced ones, NUL bytes, non-ASCII and longer ids included."""
    import pyarrow as pa

    rng = random.Random(11)
    alphabet = ["a", "Z", "0", "-", "é", "日", "\x00", "\xff"]
    for trial in range(300):
        longest = rng.choice([1, 3, 7, 8, 8, 9, 20])
        ids = [
            "".join(rng.choice(alphabet[: rng.choice([4, 6, 8])]) for _ in range(rng.randint(1, longest))).encode()[
                :longest
            ]
            or b"x"
            for _ in range(rng.randint(1, 60))
        ]
        chunk = _binary_chunk(pa, ids)
        if trial % 3 == 0 and len(ids) > 2:
            chunk = chunk.slice(1, len(ids) - 2)  # an offset into shared buffers, as Arrow's chunks have
        offsets, data = trec_columns.array_buffers(chunk)
        want_keys, want_exact = K.keys_from_bytes(data, offsets)
        keys, exact = trec_columns._chunk_keys(chunk)
        assert np.array_equal(keys, want_keys) and exact == want_exact, ids
        assert exact == (max(map(len, chunk.to_pylist())) <= 8 and b"\x00" not in b"".join(chunk.to_pylist()))
