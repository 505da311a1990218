"""Fault injection: every injected fault is recorded under its own label, and answers stay untouched.

The stress runs here use BM25 over a slice of real SciFact texts; each query is asked once, so the
fault log (what was injected into which query text) can be matched query by query against what
stress recorded.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retbench.config import validate
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.io.beir import write_beir
from retbench.retrievers.base import create
from retbench.retrievers.faults import FaultSpec, FaultyRetriever, with_faults
from retbench.studies.stress import abandoned_threads, parse_config, run_stress
from stress_support import AsyncBM25, scifact_slice, stress_raw


@pytest.fixture(scope="module")
def ds(scifact):
    return scifact_slice(scifact, n_queries=40)


@pytest.fixture(scope="module")
def bm25(ds):
    r = create("bm25s", {})
    r.index(ds.corpus)
    return r


def _cfg(tmp_path: Path, **stress):
    return parse_config(stress_raw(tmp_path / "unused", tmp_path / "out", **stress))


def _failures(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]


def _requests(out: Path) -> list[dict]:
    lines = (out / "journal.jsonl").read_text().splitlines()[1:]
    return [r for r in map(json.loads, lines) if "outcome" in r]


EXPECTED = {"error": "error", "hang": "timeout", "empty": "empty", "garbage": "invalid"}


def test_each_fault_is_recorded_with_its_label_and_answers_are_untouched(tmp_path: Path, ds, bm25) -> None:
    spec = FaultSpec(
        seed=3,
        error_rate=0.15,
        error_message="backend said: shard 3 unavailable",
        hang_rate=0.1,
        hang_s=30,
        empty_rate=0.1,
        garbage_rate=0.3,
    )
    faulty = FaultyRetriever(bm25, spec)
    cfg = _cfg(tmp_path, levels=[4], timeout_s=0.3, allowed_failure_rate=1.0)
    try:
        res = run_stress(cfg, retriever=faulty, dataset=ds, echo=lambda m: None)
    finally:
        faulty.release()
    injected = {}
    by_text = {ds.queries[q]: q for q in ds.queries}
    for text, _, kind, garbage in faulty.log.entries:
        injected[by_text[text]] = (kind, garbage)
    kinds = {k for k, _ in injected.values()}
    assert kinds == {"error", "hang", "empty", "garbage"}  # the seed exercises every kind
    assert len({g for k, g in injected.values() if k == "garbage"}) >= 3

    recs = {r["qid"]: r for r in _requests(res.out_dir)}
    assert set(recs) == set(ds.queries)
    for qid, r in recs.items():
        if qid in injected:
            kind, garbage = injected[qid]
            assert r["outcome"] == EXPECTED[kind], qid
            if kind == "garbage":
                assert r["detail"] == garbage
        else:
            assert r["outcome"] in ("ok", "short"), qid

    fails = _failures(res.out_dir)
    failing = {q for q, (k, _) in injected.items() if k != "empty"}
    assert sorted(f["qid"] for f in fails) == sorted(failing)  # one line per failed request, nothing else
    for f in fails:
        kind, garbage = injected[f["qid"]]
        assert f["kind"] == EXPECTED[kind] and f["attempt"] == 1 and f["time"]
        if kind == "error":
            assert (f["exc_type"], f["message"]) == ("RuntimeError", "backend said: shard 3 unavailable")
        if kind == "garbage":
            assert f["detail"] == garbage

    # no metric changes for the queries that succeeded; failed ones count 0; nothing imputed
    clean = evaluate(bm25.search(ds.queries, 10), ds.split("test"), ["ndcg@10", "recall@10"])
    stressed = evaluate(_level_run(res), ds.split("test"), ["ndcg@10", "recall@10"])
    ok = [q for q, r in recs.items() if r["outcome"] in ("ok", "short")]
    rows_c = [clean.query_ids.index(q) for q in ok if q in clean.query_ids]
    rows_s = [stressed.query_ids.index(q) for q in ok if q in stressed.query_ids]
    assert len(rows_c) == len(rows_s) > 10
    np.testing.assert_array_equal(clean.values[rows_c], stressed.values[rows_s])
    bad = [stressed.query_ids.index(q) for q in failing if q in stressed.query_ids]
    assert bad and not stressed.values[bad].any()
    q = res.summary.levels[0].quality
    assert q is not None and (q.scored, q.of) == (len(stressed.query_ids) - len(bad), len(stressed.query_ids))
    assert q.metrics["ndcg@10"].mean == pytest.approx(stressed.mean("ndcg@10"))
    assert res.exit_code == 0  # allowed_failure_rate 1.0


def _level_run(res):
    from retbench.results import SystemDir, load_run

    return load_run(SystemDir(res.out_dir))


def test_crash_after_n_calls_fails_every_later_call_verbatim_and_exits_3(tmp_path: Path, ds, bm25) -> None:
    faulty = FaultyRetriever(
        bm25, FaultSpec(crash_after=10, crash_message="memvid error: Embedded WAL is corrupted at offset 78667")
    )
    res = run_stress(_cfg(tmp_path, levels=[1, 4]), retriever=faulty, dataset=ds, echo=lambda m: None)
    assert res.exit_code == 3
    lv = res.summary.levels
    assert len(lv) == 1 and lv[0].counts["ok"] + lv[0].counts["short"] == 10 and lv[0].counts["error"] == 30
    assert "later levels not run" in (res.summary.stopped or "")
    first = res.first_failure
    assert first is not None and first.exc_type == "InjectedCrash"
    assert first.message == "memvid error: Embedded WAL is corrupted at offset 78667"
    assert len(_failures(res.out_dir)) == 30
    assert (res.out_dir / "run.trec").exists() and (res.out_dir / "summary.json").exists()


def test_write_fault_on_the_16th_document_stops_before_any_query_and_cli_exits_3(tmp_path: Path, ds) -> None:
    from retbench.cli import app

    folder = tmp_path / "data"
    write_beir(ds, folder)
    raw = stress_raw(
        folder,
        tmp_path / "out",
        system={"name": "wal", "adapter": "bm25s", "faults": {"write_fail_at": 16}},
        ingest_batch_size=10,
    )
    cfg_path = tmp_path / "stress.yaml"
    cfg_path.write_text(json.dumps(raw))
    result = CliRunner().invoke(app, ["stress", str(cfg_path)])
    assert result.exit_code == 3
    msg = f"injected write fault: WAL record checksum mismatch (document 16, id {ds.corpus.ids[15]!r})"
    assert msg in result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ingest"]["written"] == 10 and summary["ingest"]["first_failure"]["docs"] == [10, 20]
    assert summary["levels"] == [] and summary["requests"] == 0
    fails = _failures(tmp_path / "out")
    assert len(fails) == 1 and fails[0]["phase"] == "ingest" and fails[0]["message"] == msg


def test_async_adapter_hangs_are_cancelled_as_timeouts_without_abandoning_threads(tmp_path: Path, ds) -> None:
    inner = AsyncBM25()
    faulty = FaultyRetriever(inner, FaultSpec(seed=5, hang_rate=0.2, hang_s=30, error_rate=0.1))
    before = abandoned_threads()
    res = run_stress(
        _cfg(tmp_path, levels=[8], timeout_s=0.2, allowed_failure_rate=1.0),
        retriever=faulty,
        dataset=ds,
        echo=lambda m: None,
    )
    assert res.summary.mode == "async"
    hangs = sum(1 for e in faulty.log.entries if e[2] == "hang")
    errors = sum(1 for e in faulty.log.entries if e[2] == "error")
    counts = res.summary.levels[0].counts
    assert hangs > 0 and counts["timeout"] == hangs and counts["error"] == errors
    assert abandoned_threads() == before


def test_same_seed_same_faults_other_seed_other_faults(bm25, ds) -> None:
    texts = [ds.queries[q] for q in ds.queries] * 2

    def log(seed: int) -> list:
        f = FaultyRetriever(bm25, FaultSpec(seed=seed, error_rate=0.3, empty_rate=0.2))
        for t in texts:
            with contextlib.suppress(RuntimeError):
                f.search_one(t, 5)
        return f.log.entries

    assert log(1) == log(1)
    assert log(1) != log(2)
    assert 0 < len(log(1)) < len(texts)


def test_latency_draws_follow_their_distribution(bm25) -> None:
    const = FaultyRetriever(bm25, FaultSpec(latency={"dist": "constant", "ms": 7}))
    assert {const._plan(f"q{i}").delay_s for i in range(20)} == {0.007}
    uni = FaultyRetriever(bm25, FaultSpec(seed=1, latency={"dist": "uniform", "low_ms": 2, "high_ms": 4}))
    d = [uni._plan(f"q{i}").delay_s for i in range(200)]
    assert 0.002 <= min(d) < 0.0025 and 0.0035 < max(d) <= 0.004
    logn = FaultyRetriever(bm25, FaultSpec(seed=1, latency={"dist": "lognormal", "ms": 10, "sigma": 0.5}))
    assert np.median([logn._plan(f"q{i}").delay_s for i in range(400)]) == pytest.approx(0.010, rel=0.15)


def test_fault_config_errors_name_the_field(bm25) -> None:
    def check(block: dict) -> FaultSpec:
        return validate(FaultSpec, block, prefix="faults")

    with pytest.raises(ConfigError, match=r"faults\.bogus"):
        check({"bogus": 1})
    with pytest.raises(ConfigError, match="more than 1"):
        check({"error_rate": 0.6, "empty_rate": 0.6})
    with pytest.raises(ConfigError, match=r"faults\.error_type"):
        check({"error_type": "SystemExit"})
    with pytest.raises(ConfigError, match=r"faults\.garbage_kinds"):
        check({"garbage_kinds": ["nonsense"]})
    with pytest.raises(ConfigError, match=r"faults\.latency\.dist"):
        check({"latency": {"dist": "gamma"}})
    assert with_faults(bm25, None) is bm25 and isinstance(with_faults(bm25, check({})), FaultyRetriever)
