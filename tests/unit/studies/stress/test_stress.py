"""Stress mode: the failure taxonomy, timeouts and abandoned threads, retries, figures and the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retbench.errors import ConfigError
from retbench.report.stress import render_markdown
from retbench.results.stress import WarmUp, read_stress
from retbench.results.stress_figures import LatencySummary
from retbench.retrievers.base import create
from retbench.retrievers.faults import FaultSpec, FaultyRetriever
from retbench.studies.stress import (
    INVALID_KINDS,
    is_failure,
    parse_config,
    run_stress,
    summarize_level,
    validate_ranking,
)
from stress_support import scifact_slice, stress_raw

CORPUS = {"a", "b", "c", "d"}


@pytest.mark.parametrize(
    ("ranking", "k", "kind"),
    [
        ([("a", 3.0), ("b", 2.0), ("c", 1.0)], 3, None),
        ([("a", 3.0), ("b", 2.0)], 3, "short"),
        ([("a", 3.0), ("b", 2.0), ("c", 1.0), ("d", 0.5)], 10, None),  # the corpus has no more to give
        ([], 3, "empty"),
        ({"hits": ["a"]}, 3, "wrong_type"),
        ([("a", 1.0, "x")], 3, "wrong_type"),
        ([(1, 1.0)], 3, "wrong_type"),
        ([("a", "high")], 3, "wrong_type"),
        ([("a", True)], 3, "wrong_type"),
        ([("a", 1.0), ("b", float("nan"))], 3, "non_finite_score"),
        ([("a", float("inf"))], 3, "non_finite_score"),
        ([("a", 1.0), ("zzz", 0.5)], 3, "unknown_id"),
        ([("a", 1.0), ("a", 0.5)], 3, "duplicate_id"),
        ([("a", np.float32(1.5)), ("b", np.int64(1)), ("c", 0)], 3, None),
    ],
)
def test_validate_ranking_labels_every_kind(ranking, k, kind) -> None:
    assert validate_ranking(ranking, CORPUS, k) == kind
    assert is_failure(kind) == (kind in INVALID_KINDS)


@pytest.fixture(scope="module")
def ds(scifact):
    return scifact_slice(scifact, n_queries=30, n_other_docs=200)


@pytest.fixture(scope="module")
def bm25(ds):
    r = create("bm25s", {})
    r.index(ds.corpus)
    return r


def _cfg(tmp_path: Path, **stress):
    return parse_config(stress_raw(tmp_path / "unused", tmp_path / "out", **stress))


def _quiet(m: str) -> None:
    pass


def test_hung_sync_calls_become_timeouts_and_the_abandoned_thread_cap_stops_the_level(tmp_path: Path, ds, bm25) -> None:
    faulty = FaultyRetriever(bm25, FaultSpec(hang_rate=1.0, hang_s=30))
    try:
        res = run_stress(
            _cfg(tmp_path, levels=[4], timeout_s=0.1, max_abandoned=3), retriever=faulty, dataset=ds, echo=_quiet
        )
    finally:
        faulty.release()
    lv = res.summary.levels[0]
    assert res.exit_code == 3
    assert "max_abandoned=3" in (lv.stopped or "") and "max_abandoned=3" in (res.summary.stopped or "")
    assert lv.counts["timeout"] == lv.completed >= 3
    assert lv.completed < 30  # the rest was never issued (and is not imputed)
    assert lv.quality is not None and lv.quality.scored == 0 and lv.quality.metrics["ndcg@10"].mean == 0.0
    assert lv.latency_success.n == 0 and (lv.latency_failure.p50 or 0.0) >= 100.0
    fails = [json.loads(x) for x in (res.out_dir / "failures.jsonl").read_text().splitlines()]
    assert {f["kind"] for f in fails} == {"timeout"} and fails[0]["message"] == "no answer within 0.1 s"


def test_retries_are_recorded_attempt_by_attempt(tmp_path: Path, ds, bm25) -> None:
    faulty = FaultyRetriever(
        bm25, FaultSpec(seed=11, error_rate=0.5, error_type="ConnectionResetError", error_message="peer reset")
    )
    res = run_stress(_cfg(tmp_path, levels=[3], retries=2, backoff_s=0.001), retriever=faulty, dataset=ds, echo=_quiet)
    lines = (res.out_dir / "journal.jsonl").read_text().splitlines()[1:]
    recs = [r for r in map(json.loads, lines) if "outcome" in r]
    fails = [json.loads(x) for x in (res.out_dir / "failures.jsonl").read_text().splitlines()]
    assert len(fails) == sum(1 for e in faulty.log.entries if e[2] == "error")  # every failed attempt, once
    assert all(f["exc_type"] == "ConnectionResetError" and f["message"] == "peer reset" for f in fails)
    recovered = [r for r in recs if r["attempts"] > 1 and r["outcome"] == "ok"]
    lost = [r for r in recs if r["outcome"] == "error"]
    assert recovered and lost  # seed 11 gives both
    for r in recovered:
        assert [f["attempt"] for f in r["failures"]] == list(range(1, r["attempts"]))
    for r in lost:
        assert r["attempts"] == 3 and [f["attempt"] for f in r["failures"]] == [1, 2, 3]
        assert r["error"] == "ConnectionResetError: peer reset"
    lv = res.summary.levels[0]
    assert lv.recovered_by_retry == len(recovered) and lv.retries == sum(r["attempts"] - 1 for r in recs)
    assert lv.counts["error"] == len(lost) and res.exit_code == 3


def test_allowed_failure_rate_decides_the_exit_code(tmp_path: Path, ds, bm25) -> None:
    spec = FaultSpec(seed=2, error_rate=0.1)
    ok = run_stress(
        _cfg(tmp_path / "a", levels=[1, 2], allowed_failure_rate=0.5),
        retriever=FaultyRetriever(bm25, spec),
        dataset=ds,
        echo=_quiet,
    )
    assert ok.exit_code == 0 and len(ok.summary.levels) == 2 and ok.summary.complete
    assert ok.summary.failed > 0 and ok.summary.failure_rate <= 0.5
    bad = run_stress(
        _cfg(tmp_path / "b", levels=[1, 2]), retriever=FaultyRetriever(bm25, spec), dataset=ds, echo=_quiet
    )
    assert bad.exit_code == 3 and len(bad.summary.levels) == 1 and not bad.summary.complete


def test_duration_mode_cycles_queries_until_the_deadline(tmp_path: Path, ds, bm25) -> None:
    res = run_stress(_cfg(tmp_path, levels=[2], duration_s=0.3), retriever=bm25, dataset=ds, echo=_quiet)
    lv = res.summary.levels[0]
    assert lv.planned is None and lv.completed > 0 and lv.failed == 0
    assert lv.quality is not None and lv.quality.of == 30 and lv.quality.scored == min(30, lv.completed)
    assert res.exit_code == 0


def test_summary_separates_success_and_failure_latency_and_measures_qps() -> None:
    def rec(i: int, outcome: str, lat: float, t: float, seg: str, attempts: int = 1) -> dict:
        return {
            "i": i,
            "qid": f"q{i}",
            "outcome": outcome,
            "detail": "unknown_id" if outcome == "invalid" else None,
            "latency": lat,
            "t": t,
            "seg": seg,
            "attempts": attempts,
            "failures": [],
        }

    recs = [
        rec(0, "ok", 0.010, 0.5, "s1"),
        rec(1, "ok", 0.020, 1.0, "s1"),
        rec(2, "timeout", 2.0, 2.0, "s1"),
        rec(3, "short", 0.030, 0.5, "s2", attempts=2),
        rec(4, "invalid", 0.001, 1.0, "s2"),
        rec(5, "empty", 0.002, 1.0, "s2"),
    ]
    fig = summarize_level(recs, 4, planned=6)
    assert fig.elapsed_s == 3.0 and fig.qps == 2.0  # 6 requests over 2.0 s + 1.0 s of two segments
    assert fig.latency_success.n == 4 and fig.latency_success.max == pytest.approx(30.0)
    assert fig.latency_failure.n == 2 and fig.latency_failure.max == pytest.approx(2000.0)
    assert fig.rates == pytest.approx({"error": 0, "timeout": 1 / 6, "empty": 1 / 6, "invalid": 1 / 6, "short": 1 / 6})
    assert fig.invalid_kinds == {"unknown_id": 1} and fig.retries == 1 and fig.recovered_by_retry == 1
    assert fig.failed == 2 and fig.answered == 4
    lat = LatencySummary.of_seconds([0.001 * i for i in range(1, 101)])
    assert lat.p50 == pytest.approx(50.5) and lat.p99 == pytest.approx(99.01) and lat.max == pytest.approx(100.0)
    assert LatencySummary.of_seconds([]).p50 is None


def test_report_labels_success_only_means_and_coverage(tmp_path: Path, ds, bm25) -> None:
    faulty = FaultyRetriever(bm25, FaultSpec(seed=4, error_rate=0.3))
    res = run_stress(_cfg(tmp_path, levels=[2], allowed_failure_rate=1.0), retriever=faulty, dataset=ds, echo=_quiet)
    md = (res.out_dir / "report.md").read_text()
    q = res.summary.levels[0].quality
    assert q is not None
    assert f"scored {q.scored} of {q.of}" in md and q.scored < q.of
    assert "ndcg@10 (success-only)" in md and "failed and unasked queries count 0" in md
    head, only = q.metrics["ndcg@10"].mean, q.metrics["ndcg@10"].mean_success_only
    assert only is not None and head == pytest.approx(only * q.scored / q.of)  # failures are zeros, not dropped
    assert md == render_markdown(read_stress(res.out_dir))
    assert "First failure (query" in md and "RuntimeError: injected fault" in md
    figures = res.summary.resources or {}
    assert figures["ingest_peak_rss_mib"] > 0 and figures["level_2_peak_rss_mib"] > 0 and figures["devices"] == ["cpu"]
    assert "Resources: peak RSS MiB: ingest " in md and ", level 2 " in md
    page = (res.out_dir / "report.html").read_text()
    assert page.count("<svg") == 2 and f"scored {q.scored} of {q.of}" in page and "RuntimeError: injected fault" in page


def test_stress_config_errors_name_the_field(tmp_path: Path) -> None:
    raw = stress_raw(tmp_path, tmp_path / "out", levels=[0])
    with pytest.raises(ConfigError, match=r"stress\.levels"):
        parse_config(raw, "s.yaml")
    raw = stress_raw(tmp_path, tmp_path / "out", retry_on=["empty"])
    with pytest.raises(ConfigError, match=r"stress\.retry_on"):
        parse_config(raw, "s.yaml")
    raw = stress_raw(tmp_path, tmp_path / "out", levels=[1], bogus=1)
    with pytest.raises(ConfigError, match=r"stress\.bogus"):
        parse_config(raw, "s.yaml")
    raw = stress_raw(tmp_path, tmp_path / "out")
    raw["systems"].append({"name": "other", "adapter": "bm25s"})
    with pytest.raises(ConfigError, match="exactly one system"):
        parse_config(raw, "s.yaml")
    raw = stress_raw(tmp_path, tmp_path / "out", system={"adapter": "bm25s", "faults": {"error_rate": 2}})
    with pytest.raises(ConfigError, match=r"faults\.error_rate"):
        parse_config(raw, "s.yaml")
    cfg = parse_config(
        stress_raw(tmp_path, tmp_path / "out", system={"adapter": "bm25s", "faults": {"error_rate": 0.1}}), "s.yaml"
    )
    assert cfg.system.faults == FaultSpec(error_rate=0.1) and cfg.k == 10


def test_resume_fingerprint_ignores_the_output_folder_but_not_the_load(tmp_path: Path) -> None:
    def fp(out: str, **stress) -> str:
        return parse_config(stress_raw(tmp_path, tmp_path / out, **stress), "s.yaml").fingerprint()

    assert fp("a") == fp("b")
    assert fp("a") != fp("a", timeout_s=1.0)


def test_unreachable_store_stops_at_ingestion_and_hidden_adapter_retries_are_flagged(tmp_path: Path, ds) -> None:
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    http = create("http", {"url": f"http://127.0.0.1:{port}/search", "retries": 2, "timeout": 2})
    res = run_stress(_cfg(tmp_path, levels=[2]), retriever=http, dataset=ds, echo=_quiet)
    assert res.exit_code == 3 and res.summary.requests == 0
    first = res.first_failure
    assert first is not None and first.phase == "ingest" and "unreachable" in (first.message or "")
    assert any("retries internally (2x)" in w for w in res.summary.warnings)
    assert "retries internally" in (res.out_dir / "report.md").read_text()


class _ThreadCounting:
    """A real BM25 that notes how many stress worker threads are alive whenever it is called."""

    def __init__(self, inner) -> None:
        self.inner, self.seen = inner, []
        for attr in ("name", "adapter", "capabilities", "describe", "fingerprint"):
            setattr(self, attr, getattr(inner, attr))

    def search_one(self, text: str, k: int):
        import threading

        self.seen.append(sum(t.name.startswith("retbench-stress-") for t in threading.enumerate()))
        return self.inner.search_one(text, k)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def test_a_level_starts_no_more_workers_than_it_has_requests(tmp_path: Path, ds, bm25) -> None:
    counting = _ThreadCounting(bm25)
    res = run_stress(_cfg(tmp_path, levels=[4096], requests=5, warmup=0), retriever=counting, dataset=ds, echo=_quiet)
    lv = res.summary.levels[0]
    assert (lv.concurrency, lv.completed, lv.failed) == (4096, 5, 0)
    assert len(counting.seen) == 5 and max(counting.seen) <= 5  # 5 threads for 5 requests, not 4,096


def test_a_level_above_the_most_workers_retbench_starts_is_refused_saying_the_bound(tmp_path: Path) -> None:
    raw = stress_raw(tmp_path, tmp_path / "out", levels=[1, 100_000], requests=5)
    with pytest.raises(
        ConfigError, match=r"stress\.levels.*a level of 100000 is above the most concurrent workers .*\(4096\)"
    ):
        parse_config(raw, "s.yaml")


class _Counting:
    """The bm25 retriever, counting the searches it is asked for."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0
        for attr in ("name", "adapter", "capabilities"):
            setattr(self, attr, getattr(inner, attr))

    def search_one(self, text: str, k: int):
        self.calls += 1
        return self.inner.search_one(text, k)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def test_a_resumed_level_neither_reruns_nor_recounts_its_warm_up(tmp_path: Path, ds, bm25) -> None:
    cfg = _cfg(tmp_path, levels=[1], requests=12, warmup=3)
    whole = run_stress(cfg, retriever=bm25, dataset=ds, echo=_quiet).summary
    journal = tmp_path / "out" / "journal.jsonl"
    lines = journal.read_text().splitlines()
    # what a kill after the 5th measured request leaves: the header, the warm-up, 5 measured requests
    kept = [ln for ln in lines if json.loads(ln).get("phase") == "warmup" or json.loads(ln).get("type") == "header"]
    kept += [ln for ln in lines if json.loads(ln).get("phase") == "measure"][:5]
    assert len(kept) == 1 + 3 + 5
    journal.write_text("\n".join(kept) + "\n")
    counting = _Counting(bm25)
    resumed = run_stress(cfg, retriever=counting, dataset=ds, echo=_quiet).summary
    assert counting.calls == 12 - 5  # the warm-up is not sent again
    a, b = whole.levels[0], resumed.levels[0]
    assert b.warmup == a.warmup == WarmUp(requests=3, failed=0)
    assert resumed.requests == whole.requests == 15 and b.completed == a.completed == 12
