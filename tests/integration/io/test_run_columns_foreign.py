"""Columnar run files as other tools write them: tables built from Python values (pyarrow asks pandas whether
they are array-like, so these live outside the unit tier, which promises core dependencies only)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from retbench.data import Run
from retbench.errors import InputError
from retbench.io.trec import read_run


def _same_rankings(a: Run, b: Run) -> None:
    """The same queries, each with the same documents in the same order and the same scores."""
    assert a.query_ids == b.query_ids and a.offsets.tolist() == b.offsets.tolist()
    assert a.doc_ids.tolist() == b.doc_ids.tolist() and a.scores.tolist() == b.scores.tolist()


def test_a_table_from_another_tool_is_checked_and_ordered_as_a_trec_file_with_the_same_lines(tmp_path):
    # interleaved queries, rising scores, a doc listed twice in one query, plain (not dictionary) strings
    rows = [("b", "x", 1.0), ("a", "y", 2.0), ("b", "z", 3.0), ("b", "x", 0.5), ("a", "w", 2.0), ("c", "v", 1)]
    pq.write_table(
        pa.table({"query": [r[0] for r in rows], "doc": [r[1] for r in rows], "score": [float(r[2]) for r in rows]}),
        tmp_path / "pandas.parquet",
    )
    (tmp_path / "same.trec").write_text("".join(f"{q} Q0 {d} 0 {s} t\n" for q, d, s in rows))
    from_columns, from_text = read_run(tmp_path / "pandas.parquet"), read_run(tmp_path / "same.trec")
    _same_rankings(from_columns, from_text)
    assert from_columns.n_duplicates == from_text.n_duplicates == 1
    assert from_columns.to_dict() == {"b": {"z": 3.0, "x": 1.0}, "a": {"y": 2.0, "w": 2.0}, "c": {"v": 1.0}}


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"query": ["q"], "doc": ["d"]}, "score"),
        ({"query": ["q"], "doc": [None], "score": [1.0]}, "doc"),
        ({"query": ["q"], "doc": ["two words"], "score": [1.0]}, "doc"),
        ({"query": [""], "doc": ["d"], "score": [1.0]}, "query"),
        ({"query": ["q", "q"], "doc": ["d", "e"], "score": [1.0, float("nan")]}, "score"),
        ({"query": ["q"], "doc": ["d"], "score": ["high"]}, "score"),
        ({"query": ["q"], "doc": [7], "score": [1.0]}, "doc"),
    ],
    ids=["no-score-column", "null-id", "id-with-space", "empty-query-id", "nan-score", "text-score", "number-id"],
)
def test_a_bad_columnar_run_is_one_input_error_naming_the_file_and_field(tmp_path, table, field):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(table), path)
    with pytest.raises(InputError) as caught:
        read_run(path)
    assert caught.value.field == field and str(path) in str(caught.value)
