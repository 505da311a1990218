"""Inputs of the metric engine: run construction (trec_eval order, duplicates), the fast TREC reader, judging.

The fast paths (column-wise TREC parsing, runs built from mappings, judging by lookups in those
mappings) must give exactly what the plain paths give; each test builds both and compares. The files here are
small, and a small file is read line by line (`SMALL_FILE_BYTES`), so every test here lowers that size to 0: the
column-wise reader is what they test.
"""

from __future__ import annotations

import gzip
import random

import numpy as np
import pytest

from retbench.data import Qrels, Run, RunBuilder
from retbench.data.keys import key_strings
from retbench.errors import InputError
from retbench.io import trec
from retbench.io.trec import (
    _RUN_FIELDS,
    _read_qrels_lines,
    _read_run_lines,
    read_qrels,
    read_run,
    write_qrels,
    write_run,
)
from retbench.io.trec_columns import read_columns
from retbench.metrics.judges import GainMatrix, judge_qrels


@pytest.fixture(autouse=True)
def _column_wise_at_every_size(monkeypatch):
    monkeypatch.setattr(trec, "SMALL_FILE_BYTES", 0)


def test_a_small_file_reads_line_by_line_and_gives_what_the_column_reader_gives(tmp_path, monkeypatch):
    path = tmp_path / "run.trec"
    path.write_text("q2 Q0 b 1 2.5 tag\nq1 Q0 a 1 1.0 tag\nq2 Q0 c 2 2.5 tag\n")
    column_wise = read_run(path)
    monkeypatch.setattr(trec, "SMALL_FILE_BYTES", 32 * 1024)
    small = read_run(path)
    assert small._doc_key is None and column_wise._doc_key is not None  # each path really ran
    assert (small.query_ids, small.doc_ids.tolist(), small.scores.tolist(), small.name) == (
        column_wise.query_ids,
        column_wise.doc_ids.tolist(),
        column_wise.scores.tolist(),
        column_wise.name,
    )


def test_ties_break_by_doc_id_descending_as_strings():
    run = Run.from_dict({"q": {"d9": 1.0, "d10": 1.0, "d2": 2.0, "d100": 1.0, "a": 0.5}})
    # "d9" > "d100" > "d10" as strings: trec_eval's strcmp order, not numeric order
    assert run.docs("q") == ["d2", "d9", "d100", "d10", "a"]


def test_rank_column_and_input_order_are_ignored(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 low 1 0.1 t\nq1 Q0 high 2 0.9 t\nq1 Q0 mid 3 0.5 t\n")
    assert read_run(path).docs("q1") == ["high", "mid", "low"]


def test_duplicates_keep_the_first_occurrence_and_are_counted():
    run = Run.from_dict({"q": [("a", 1.0), ("b", 3.0), ("a", 5.0)], "p": [("x", 1.0)]})
    assert run.ranking("q") == [("b", 3.0), ("a", 1.0)]
    assert run.n_duplicates == 1


def test_callers_arrays_are_never_reordered_in_place():
    docs = np.array(["a", "c", "b"], dtype=object)
    scores = np.array([1.0, 1.0, 1.0])
    run = Run(["q"], np.array([0, 3]), docs, scores)
    assert run.docs("q") == ["c", "b", "a"]
    assert docs.tolist() == ["a", "c", "b"]


def _random_run_text(rng: random.Random, style: str) -> str:
    """A run file; `style` "space" or "tab" separates every field by one of those (Arrow reads the
    file as it is), "mixed" varies the whitespace and adds blank lines holding some (collapsed first)."""
    lines = []
    for _ in range(rng.randint(0, 60)):
        q = rng.choice(
            ["q1", "q2", "10", "2", "a-b", "query-with-a-long-id"]
        )  # interleave: grouped by first appearance
        d = rng.choice(
            ["d1", "d2", "D10", "x" * rng.randint(1, 30), "doc-7", "y" * rng.randint(7, 9)]
        )  # repeats: duplicates
        score = rng.choice([repr(rng.random()), "1", "-2.5e-3", "3.0", "0", "1E2", "+.5", f"{rng.random():.6f}"])
        sep = {"space": " ", "tab": "\t"}.get(style) or rng.choice([" ", "\t", "  "])
        lines.append(sep.join([q, "Q0", d, str(rng.randint(1, 9)), score, rng.choice(["tagA", "run_b"])]))
        if rng.random() < 0.1:
            lines.append(rng.choice(["", "   ", "\t"]) if style == "mixed" else "")
    return rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n"])


def test_fast_reader_equals_line_reader_on_random_files(tmp_path):
    rng = random.Random(7)
    for trial in range(150):
        style = ("space", "tab", "mixed")[trial % 3]
        text = _random_run_text(rng, style)
        path = tmp_path / ("run.trec.gz" if trial % 4 == 0 else "run.trec")
        if path.suffix == ".gz":
            with gzip.open(path, "wt") as fh:
                fh.write(text)
        else:
            path.write_bytes(text.encode())
        if text.strip():
            assert read_columns(path, _RUN_FIELDS, "score") is not None  # the column-wise path really ran
        fast, slow = read_run(path), _read_run_lines(path, None)
        assert fast.query_ids == slow.query_ids and fast.name == slow.name
        assert fast.offsets.tolist() == slow.offsets.tolist()
        assert fast.doc_ids.tolist() == slow.doc_ids.tolist()
        assert fast.scores.tolist() == slow.scores.tolist()  # identical doubles, not just close
        assert fast.n_duplicates == slow.n_duplicates


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("q1 Q0 d1 1 x tag", "score must be a number"),
        ("q1 Q0 d1 1 2", "expected 6 columns"),
        ("q1 Q0 d1 1 nan t", "score must be finite"),
    ],
)
def test_bad_run_lines_are_reported_with_their_line(tmp_path, line, message):
    path = tmp_path / "run.trec"
    path.write_text(f"q1 Q0 ok 1 3.5 t\n{line}\n")
    with pytest.raises(InputError, match=message) as err:
        read_run(path)
    assert err.value.line == 2


def test_non_ascii_ids_read_exactly(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 café 1 2.0 t\nq1 Q0 naïve 2 1.0 t\n", encoding="utf-8")
    assert read_run(path).docs("q1") == ["café", "naïve"]


def test_scifact_style_run_round_trips_through_the_fast_reader(tmp_path):
    rng = np.random.default_rng(3)
    ranking = {
        f"q{q}": {
            f"doc{d}": float(np.float32(s))
            for d, s in zip(rng.choice(5000, 50, replace=False), rng.random(50), strict=True)
        }
        for q in range(40)
    }
    run = Run.from_dict(ranking, name="sys")
    write_run(run, tmp_path / "run.trec")
    back = read_run(tmp_path / "run.trec")
    assert back.query_ids == run.query_ids and back.name == "sys"
    assert back.doc_ids.tolist() == run.doc_ids.tolist() and back.scores.tolist() == run.scores.tolist()


# -- judging --------------------------------------------------------------------------------------------
def _hits(gm: GainMatrix) -> list[tuple[int, int, float]]:
    return sorted(zip(gm.hit_rows.tolist(), gm.hit_ranks.tolist(), gm.hit_grades.tolist(), strict=True))


@pytest.mark.parametrize("id_style", ["short", "long"])
def test_four_judging_paths_agree(tmp_path, id_style):
    """Mappings (lookup + binary search), interned codes (gather), doc keys (runs read from TREC files;
    short ids are their own keys, long ones hashed) and a plain scan give identical hits."""
    rng = random.Random(11)
    docs = [f"d{i}" if id_style == "short" else f"a-longer-document-id-{i}" for i in range(40)]
    for _ in range(60):
        ranking = {f"q{q}": {d: rng.randint(0, 8) / 2 for d in rng.sample(docs, rng.randint(0, 30))} for q in range(6)}
        qrels = Qrels(
            {f"q{q}": {d: rng.randint(-1, 3) for d in rng.sample(docs, rng.randint(1, 12))} for q in range(8)}
        )
        by_maps = Run.from_dict(ranking)
        assert by_maps._maps is not None
        by_scan = Run.from_dict({q: list(r.items()) for q, r in ranking.items()})
        assert by_scan._maps is None and by_scan._codes is None
        by_codes = Run.from_dict({q: list(r.items()) for q, r in ranking.items()})
        by_codes.doc_codes()
        write_run(by_scan, tmp_path / "run.trec")
        by_file = read_run(tmp_path / "run.trec")
        assert by_file._doc_key is not None or len(by_file.scores) == 0
        assert by_file._key_exact == (id_style == "short") or len(by_file.scores) == 0
        expected = _hits(judge_qrels(by_scan, qrels))
        assert _hits(judge_qrels(by_maps, qrels)) == expected
        assert _hits(judge_qrels(by_codes, qrels)) == expected
        assert _hits(judge_qrels(by_file, qrels)) == expected
        if id_style == "short":
            assert by_file._doc_ids is None  # judged on keys alone
        write_qrels(qrels, tmp_path / "qrels.trec")
        assert _hits(judge_qrels(by_file, read_qrels(tmp_path / "qrels.trec"))) == expected
        # the lazily materialized doc ids of a mapping-built run are the eager ones
        assert by_maps._doc_ids is None
        assert by_maps.doc_ids.tolist() == by_scan.doc_ids.tolist()
        assert by_maps.scores.tolist() == by_scan.scores.tolist()
        # and the hits are exactly the positive grades at their trec_eval ranks
        brute = [
            (i, r, float(qrels[q][d]))
            for i, q in enumerate(qrels)
            if q in by_scan
            for r, d in enumerate(by_scan.docs(q))
            if qrels[q].get(d, 0) > 0
        ]
        assert expected == sorted(brute)


def test_a_mapping_changed_after_the_run_was_built_is_detected():
    ranking = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    run = Run.from_dict(ranking)  # the mappings are kept, not copied
    del ranking["q"]["c"]
    with pytest.raises(ValueError, match="changed after it was built"):
        judge_qrels(run, Qrels({"q": {"c": 1}}))


def test_runs_from_mappings_materialize_doc_ids_only_on_demand():
    ranking = {"q": {"a": 1.0, "c": 1.0, "b": 2.0}, "p": {"x": 0.5, "y": 0.7}}
    run = Run.from_dict(ranking)
    gm = judge_qrels(run, Qrels({"q": {"a": 1}, "p": {"x": 2}}))
    assert run._doc_ids is None  # judged without building the doc id column
    assert _hits(gm) == [(0, 2, 1.0), (1, 1, 2.0)]
    assert run.docs("q") == ["b", "c", "a"] and run.docs("p") == ["y", "x"]


def test_colliding_doc_keys_cannot_produce_wrong_hits(tmp_path):
    (tmp_path / "run.trec").write_text("q Q0 a 1 3.0 t\nq Q0 b 2 2.0 t\nq Q0 c 3 1.0 t\n")
    run = read_run(tmp_path / "run.trec")
    from retbench.data.keys import key_strings

    assert run._doc_key is not None and run._key_exact
    run._doc_key = np.repeat(key_strings(["c"])[0], 3)  # a and b now collide with the judged c
    run._key_exact = False  # as keys of long ids are: equal keys get their strings compared
    gm = judge_qrels(run, Qrels({"q": {"c": 2, "zz": 1}}))
    assert _hits(gm) == [(0, 2, 2.0)]
    assert run._doc_ids is None  # checked three strings, never built the column


def test_gain_matrix_dense_constructor_for_new_judges():
    gm = GainMatrix(["a", "b"], np.array([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]]), ideal=[[1, 2, 0, 3], []], lengths=[3, 0])
    assert gm.gains.tolist() == [[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]]
    assert gm.ideal(0).tolist() == [3.0, 2.0, 1.0]  # positive grades only, best first
    assert gm.n_relevant(1).tolist() == [3, 0] and gm.n_relevant(2).tolist() == [2, 0]
    sub = gm.take([1, 0])
    assert sub.query_ids == ["b", "a"] and sub.gains.tolist() == [[0.0, 0.0, 0.0], [0.0, 2.0, 1.0]]
    with pytest.raises(ValueError):
        GainMatrix(["a"], np.zeros((2, 3)), ideal=[[1]])


def test_run_builder_runs_are_judged_like_mapping_runs():
    builder = RunBuilder("b")
    builder.add("q", [("x", 2.0), ("y", 2.0), ("z", 1.0)])
    qrels = Qrels({"q": {"y": 1, "z": 2}})
    assert _hits(judge_qrels(builder.build(), qrels)) == _hits(
        judge_qrels(Run.from_dict({"q": {"x": 2.0, "y": 2.0, "z": 1.0}}), qrels)
    )


def test_score_parsing_is_bit_exact_with_float(tmp_path):
    """Arrow's column-wise float parsing gives float()'s exact doubles (correctly rounded, -0.0 kept)."""
    rng = random.Random(5)
    toks = [
        "0",
        "-0",
        "+3.5",
        ".5",
        "5.",
        "-.25",
        "0.000000000000001",
        "123456789012345",
        "1234567890123456",
        "0.1",
        "0.3",
        "9007199254740993",
        "1e5",
        "-2.5E-3",
        "2.2250738585072011e-308",
        "4.9e-324",
        "1.7976931348623157e308",
        "0.30000000000000004",
    ]
    for _ in range(20000):
        k = rng.random()
        if k < 0.4:
            toks.append(f"{rng.uniform(-50, 50):.6f}")
        elif k < 0.6:
            toks.append(str(rng.randint(-(10**12), 10**12)))
        elif k < 0.8:
            toks.append(repr(rng.random()))
        else:
            toks.append(f"{rng.uniform(0, 1e6):.{rng.randint(0, 25)}f}")
    path = tmp_path / "run.trec"
    path.write_text("".join(f"q Q0 d{i} 1 {t} x\n" for i, t in enumerate(toks)))
    table = read_columns(path, _RUN_FIELDS, "score")
    assert table is not None
    got = np.array(table.column("score").to_pylist(), dtype=np.float64)  # Arrow's to_numpy imports pandas
    expected = np.array([float(t) for t in toks])
    assert got.view(np.int64).tolist() == expected.view(np.int64).tolist()  # same bits, -0.0 included


def test_fast_qrels_reader_equals_line_reader_on_random_files(tmp_path):
    rng = random.Random(9)
    for trial in range(100):
        lines = []
        for _ in range(rng.randint(0, 50)):
            q = rng.choice(["q1", "q2", "10", "a-long-query-identifier"])  # interleaved: grouped by first appearance
            d = rng.choice(["d1", "d2", "D10", "doc-" + "x" * rng.randint(1, 12)])
            if any(line.split()[0::2] == [q, d] for line in lines) and rng.random() < 0.8:
                continue  # mostly judged once; a repeat, as trec_eval, is refused by both readers at its line
            lines.append(f"{q} 0 {d} {rng.choice(['0', '1', '2', '-1', '3.0'])}")
        path = tmp_path / ("qrels.gz" if trial % 5 == 0 else "qrels.txt")
        text = "\n".join(lines) + "\n"
        if path.suffix == ".gz":
            with gzip.open(path, "wt") as fh:
                fh.write(text)
        else:
            path.write_text(text)
        try:
            slow = _read_qrels_lines(path)
        except InputError as exc:
            with pytest.raises(InputError) as err:
                read_qrels(path)
            assert (err.value.line, str(err.value)) == (exc.line, str(exc)) and "judged twice" in str(exc)
            continue
        fast = read_qrels(path)
        assert list(fast) == list(slow)
        assert fast.to_dict() == slow.to_dict()
        assert [list(fast[q].items()) for q in fast] == [list(slow[q].items()) for q in slow]  # order too
        assert fast.n_judgements == slow.n_judgements and ("q1" in fast) == ("q1" in slow)
        qids = ["q2", "missing", "q1"]
        (rows, docs, grades), (want_rows, want_docs, want_grades) = fast.columns(qids), slow.columns(qids)
        assert (rows.tolist(), grades.tolist()) == (want_rows.tolist(), want_grades.tolist())
        assert docs.strings().tolist() == want_docs.strings().tolist()
        if docs.keys is not None:  # the reader's keys are the ids' own (exact) keys
            assert np.array_equal(docs.keys, key_strings(docs.strings().tolist())[0])


def test_qrels_read_from_a_plain_file_stay_columnar_until_used_as_a_mapping(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 a 1\nq1 0 b 0\nq2 0 c 2\n")
    qrels = read_qrels(path)
    assert qrels._dict is None and list(qrels) == ["q1", "q2"] and len(qrels) == 2
    rows, docs, grades = qrels.columns(["q2", "q1"])
    assert docs._source[0].__class__.__name__ == "ArrowIds"  # the doc ids are still the file's bytes
    assert (rows.tolist(), docs.strings().tolist(), grades.tolist()) == ([0, 1, 1], ["c", "a", "b"], [2, 1, 0])
    assert qrels._dict is None
    assert qrels["q1"] == {"a": 1, "b": 0} and qrels.relevant("q2") == {"c"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 0 d1 1\nq1 0 d2 x\n", "grade must be an integer"),
        ("q1 0 d1 1\nq1 0 d2 1.5\n", "grade must be an integer"),
        ("q1 0 d1 1\nq1 d2 1\n", "expected 4 columns"),
    ],
)
def test_bad_qrels_lines_are_reported_with_their_line(tmp_path, text, message):
    path = tmp_path / "qrels.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as err:
        read_qrels(path)
    assert err.value.line == 2


def test_lazy_run_from_a_file_reads_one_query_without_the_whole_column(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("".join(f"q{q} Q0 d{d} {d + 1} {1.0 / (d + 1)} t\n" for q in range(3) for d in range(4)))
    run = read_run(path)
    assert run.docs("q1") == ["d0", "d1", "d2", "d3"] and run.ranking("q2")[0] == ("d0", 1.0)
    assert run._doc_ids is None
    assert run.doc_ids.tolist()[:5] == ["d0", "d1", "d2", "d3", "d0"]


def test_status_values_agree_with_the_status_dict():
    from retbench.data import QueryStatus
    from retbench.metrics.judges import run_rows

    docs, scores, offsets = (
        np.array(["x", "y", "z"], dtype=object),
        np.array([2.0, 1.0, 1.0]),
        np.array([0, 2, 2, 3, 3]),
    )
    plain = Run(["a", "b", "c", "d"], offsets, docs, scores)
    given = Run(["a", "b", "c", "d"], offsets, docs, scores, status={"c": QueryStatus.TIMEOUT, "zz": QueryStatus.ERROR})
    for qids in (["a", "b", "c", "d"], ["d", "missing", "a", "c", "b", "a"]):
        fast = plain.status_values(qids, run_rows(plain, qids))
        assert plain._status is None  # statuses that follow from the rankings: no per-query dict built
        assert fast == ["missing" if q not in plain else plain.status[q].value for q in qids]
        plain._status = None
        assert given.status_values(qids, run_rows(given, qids)) == [
            "missing" if q not in given else given.status[q].value for q in qids
        ]
    assert given.status == {
        "a": QueryStatus.OK,
        "b": QueryStatus.EMPTY,
        "c": QueryStatus.TIMEOUT,
        "d": QueryStatus.EMPTY,
    }


def test_the_unicode_spaces_the_reader_rejects_are_those_str_split_cuts_at():
    import re

    from retbench.io.trec_columns import _UNICODE_SPACE

    listed: set[int] = set()
    for lo, hi in re.findall(r"\\x\{([0-9a-f]+)\}(?:-\\x\{([0-9a-f]+)\})?", _UNICODE_SPACE):
        listed.update(range(int(lo, 16), int(hi or lo, 16) + 1))
    assert listed == {i for i in range(128, 0x110000) if chr(i).isspace()}


@pytest.mark.parametrize(
    ("text", "column_wise"),
    [
        ("q1 Q0 café 1 2.0 t\nq1 Q0 naïve 2 1.0 t\nqé Q0 日本 1 1.0 tág\n", True),  # UTF-8 ids: Arrow reads them
        ("q1 Q0 a\u00a0b 1 2.0 t\n", False),  # a no-break space: str.split() cuts there (7 columns)
        ("q1 Q0 a\u3000b 1 2.0 t\nq1 Q0 c 2 1.0 t\n", False),
        ("q1 Q0 x\u2028y 1 2.0 t\n", False),
    ],
)
def test_non_ascii_files_read_as_the_line_reader_reads_them(tmp_path, text, column_wise):
    path = tmp_path / "run.trec"
    path.write_bytes(text.encode("utf-8"))
    assert (read_columns(path, _RUN_FIELDS, "score") is not None) == column_wise
    try:
        expected = _read_run_lines(path, None)
    except InputError as exc:
        with pytest.raises(InputError) as err:
            read_run(path)
        assert (str(err.value), err.value.line) == (str(exc), exc.line)
        return
    got = read_run(path)
    assert (got.query_ids, got.doc_ids.tolist(), got.scores.tolist(), got.name) == (
        expected.query_ids,
        expected.doc_ids.tolist(),
        expected.scores.tolist(),
        expected.name,
    )
    assert _hits(judge_qrels(got, Qrels({"q1": {"naïve": 2}}))) == _hits(
        judge_qrels(expected, Qrels({"q1": {"naïve": 2}}))
    )


def test_invalid_utf8_is_reported_by_the_line_reader(tmp_path):
    path = tmp_path / "run.trec"
    path.write_bytes(b"q1 Q0 ok 1 2.0 t\nq1 Q0 bad\xff 2 1.0 t\n")
    assert read_columns(path, _RUN_FIELDS, "score") is None
    with pytest.raises(InputError, match="UTF-8") as err:
        read_run(path)
    assert err.value.line == 2


def test_a_byte_order_mark_is_not_part_of_the_first_query_id(tmp_path):
    for name, text in (
        ("run.trec", "\ufeffq1 Q0 d1 1 1.5 t\nq1 Q0 d2 2 1.0 t\n"),
        ("qrels", "\ufeffq1 0 d1 1\nq1 0 d2 2\n"),
    ):
        path = tmp_path / name
        path.write_bytes(text.encode("utf-8"))
        if name == "run.trec":
            fast, slow = read_run(path), _read_run_lines(path, None)
            assert fast.query_ids == slow.query_ids == ["q1"] and fast.docs("q1") == slow.docs("q1") == ["d1", "d2"]
        else:
            assert read_qrels(path).to_dict() == _read_qrels_lines(path).to_dict() == {"q1": {"d1": 1, "d2": 2}}


def test_only_gz_is_decompressed(tmp_path):
    import bz2

    path = tmp_path / "run.bz2"
    path.write_bytes(bz2.compress(b"q1 Q0 d1 1 1.5 t\n"))
    with pytest.raises(InputError):
        _read_run_lines(path, None)
    with pytest.raises(InputError):
        read_run(path)  # Arrow would have guessed bzip2 from the suffix; the two readers must agree


def test_qrels_are_read_only_and_grades_must_fit_in_64_bits(tmp_path):
    qrels = Qrels({"q": {"d": 0}})
    with pytest.raises(TypeError):
        qrels["q"]["d"] = 2  # an edit here would never reach judging, which reads the columns
    with pytest.raises(ValueError, match="64 bits"):
        Qrels({"q": {"d": 2**63}})
    path = tmp_path / "qrels"
    path.write_text("q1 0 a 1\nq1 0 b 1e20\n")
    with pytest.raises(InputError, match="grade out of range") as err:
        read_qrels(path)
    assert err.value.line == 2


def test_plain_mapping_qrels_keep_fractional_grades_in_judging():
    run = Run.from_dict({"q": {"d": 2.0, "e": 1.0}})
    gm = judge_qrels(run, {"q": {"d": 0.5, "e": 2.7}})
    assert gm.gains.tolist() == [[0.5, 2.7]] and gm.ideal(0).tolist() == [2.7, 0.5]


def test_a_changed_mapping_is_caught_when_reading_one_query():
    ranking = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    run = Run.from_dict(ranking)
    del ranking["q"]["c"]
    with pytest.raises(ValueError, match="changed after it was built"):
        run.docs("q")
