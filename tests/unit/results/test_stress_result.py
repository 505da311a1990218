"""A stress summary goes to disk and comes back through `results.stress`, and the reports read only it.

tests/fixtures/stress_v1 holds summary.json, report.md and report.html as the stress study wrote them before
its summary was typed: two concurrency levels with failures (`levels`), a store whose first write fails
(`ingest_failed`), and the streaming case on LanceDB with its live queries (`streaming`). These tests pin
the files byte for byte and the reports character for character.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_paths import TESTS
from retbench.io.files import write_jsonl
from retbench.report import stress, stress_stream
from retbench.results.stress import StressSummary, read_stress, write_stress
from retbench.results.stress_figures import Failure, LatencySummary
from retbench.results.stress_stream import Quality, StreamingFigures, read_live_queries

STORED = TESTS / "fixtures" / "stress_v1"


@pytest.mark.parametrize("case", ["levels", "ingest_failed", "streaming"])
def test_a_stored_stress_summary_reads_back_and_writes_out_byte_for_byte(case: str, tmp_path: Path) -> None:
    write_stress(tmp_path, read_stress(STORED / case))
    assert (tmp_path / "summary.json").read_bytes() == (STORED / case / "summary.json").read_bytes()


@pytest.mark.parametrize("case", ["levels", "ingest_failed"])
def test_the_stress_report_rendered_from_the_read_summary_is_the_stored_report(case: str) -> None:
    summary = read_stress(STORED / case)
    assert stress.render_markdown(summary) == (STORED / case / "report.md").read_text()
    assert stress.render_html(summary) == (STORED / case / "report.html").read_text()


def test_the_streaming_report_rendered_from_the_read_files_is_the_stored_report() -> None:
    summary = read_stress(STORED / "streaming")
    rows = list(read_live_queries(STORED / "streaming" / "stream_queries.jsonl"))
    assert stress_stream.render_markdown(summary) == (STORED / "streaming" / "report.md").read_text()
    assert stress_stream.render_html(summary, rows) == (STORED / "streaming" / "report.html").read_text()


def test_the_read_summary_is_typed_down_to_each_level_and_failure() -> None:
    s = read_stress(STORED / "levels")
    assert isinstance(s, StressSummary) and len(s.levels) == 2
    lv = s.levels[0]
    assert lv.completed == lv.answered + lv.failed and lv.quality is not None
    assert isinstance(lv.latency_success, LatencySummary) and lv.latency_success.n == lv.answered
    assert isinstance(s.first_failure, Failure) and s.first_failure.level == lv.concurrency
    assert stress.headline(s).startswith(f"{s.failed} of {s.requests} requests failed")
    ingest = read_stress(STORED / "ingest_failed").ingest
    assert (
        ingest is not None and ingest.first_failure is not None and ingest.first_failure.docs == (0, ingest.documents)
    )


def test_a_failure_keeps_its_record_and_says_where_it_happened() -> None:
    rec = {"phase": "live", "qid": "q1", "kind": "deleted_returned", "message": "d9 is deleted", "t_s": 1.5}
    f = Failure({**rec, "batches": 3, "filter": 0.1})
    assert list(f.to_dict()) == [*rec, "batches", "filter"]
    assert stress.describe_failure(f) == "(live, query q1, after batch 3, filter 10.0%) deleted_returned: d9 is deleted"


def test_latency_percentiles_are_in_milliseconds_and_none_without_values() -> None:
    lat = LatencySummary.of_seconds([0.001 * i for i in range(1, 101)])
    assert lat.n == 100 and lat.max == pytest.approx(100.0) and lat.p50 == pytest.approx(50.5)
    assert LatencySummary.of_seconds([]) == LatencySummary(0, None, None, None, None, None)


def test_the_stored_live_queries_read_back_and_write_out_byte_for_byte(tmp_path: Path) -> None:
    stored = STORED / "streaming" / "stream_queries.jsonl"
    rows = list(read_live_queries(stored))
    write_jsonl(tmp_path / "q.jsonl", [r.to_dict() for r in rows])
    assert (tmp_path / "q.jsonl").read_bytes() == stored.read_bytes()


def test_the_streaming_block_is_typed_down_to_each_checkpoint_filter_and_freshness_kind() -> None:
    st = read_stress(STORED / "streaming").streaming
    assert isinstance(st, StreamingFigures) and st.plan["batches"] == len(st.writes) == 5
    assert st.checkpoints_after_batch == tuple(c.batches for c in st.checkpoints) == (0, 2, 5)
    first = st.checkpoints[0].filters[0]
    assert isinstance(first.quality, Quality) and first.judged + first.skipped_no_relevant == st.queries
    assert first.latency.n == st.queries and st.live.by_filter[0].quality is None
    assert st.live.queries == sum(r.queries for r in st.live.by_filter)
    delete = st.freshness("delete")
    assert delete.removal and delete.seen + delete.never == delete.sampled and len(delete.lags_ms) == delete.seen
    assert st.freshness("update").indistinguishable == 0 and st.freshness("insert").indistinguishable is None
