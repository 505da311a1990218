"""Stress against real processes: a stress run killed with SIGKILL resumes, and a server killed mid-run
is recorded as failures with partial results saved and exit code 3.

Both run `retbench stress` as a subprocess; adapters come from `stress_support` (PYTHONPATH=tests/support).
Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from retbench.io.beir import write_beir
from retbench.results.journal import Journal
from stress_support import SUPPORT, http_system, scifact_slice, stress_raw

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
CLI = [sys.executable, "-c", "from retbench.cli import main; main()", "stress"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SUPPORT), env.get("PYTHONPATH", "")])
    return env


def _measured(journal: Path) -> list[dict]:
    """Measured request records on disk now (a torn last line is skipped, as the journal does)."""
    out = []
    for line in journal.read_bytes().split(b"\n")[1:]:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("phase") == "measure":
            out.append(rec)
    return out


def _wait_until(cond: Callable[[], bool], proc: subprocess.Popen, limit_s: float = 60.0) -> None:
    end = time.monotonic() + limit_s
    while not cond():
        if proc.poll() is not None:
            raise AssertionError(f"process ended early: {proc.communicate()}")
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


@pytest.fixture(scope="module")
def folder(scifact, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "scifact-slice"
    write_beir(scifact_slice(scifact, n_queries=40, n_other_docs=300), path)
    return path


def test_sigkilled_stress_resumes_without_redoing_losing_or_duplicating(tmp_path: Path, folder: Path) -> None:
    calls = tmp_path / "calls.log"
    out = tmp_path / "out"
    system = {"name": "slow", "adapter": "stress_support:logged_bm25", "params": {"log": str(calls), "delay_ms": 40}}
    raw = stress_raw(folder, out, system=system, levels=[4], requests=80, flush_interval_s=0.05)
    cfg = tmp_path / "stress.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    journal = out / "journal.jsonl"

    proc = subprocess.Popen([*CLI, str(cfg)], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_until(lambda: journal.exists() and len(_measured(journal)) >= 12, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    before = {r["key"] for r in _measured(journal)}
    calls_before = len(calls.read_text().splitlines())
    assert 12 <= len(before) < 80 and calls_before >= len(before)

    done = subprocess.run([*CLI, str(cfg)], env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    calls_after = len(calls.read_text().splitlines()) - calls_before
    assert calls_after == 80 - len(before)  # finished requests are not asked again

    j = Journal(journal)
    keys = [r["key"] for r in j.records(lambda r: r.get("phase") == "measure")]
    assert j.duplicates == 0 and sorted(keys) == sorted(f"4:{i}" for i in range(80))
    assert before <= set(keys)
    j.close()
    summary = json.loads((out / "summary.json").read_text())
    lv = summary["levels"][0]
    assert summary["resumed"] and lv["completed"] == 80 and lv["segments"] == 2 and lv["failed"] == 0
    assert lv["quality"]["scored"] == lv["quality"]["of"] == 40
    trec_qids = {line.split()[0] for line in (out / "run.trec").read_text().splitlines()}
    assert len(trec_qids) == 40


def _fault_pattern(out: Path) -> tuple[dict[str, tuple], list[tuple]]:
    """Each measured request's outcome, and every measured failed attempt, as the run journaled them."""
    j = Journal(out / "journal.jsonl")
    try:
        recs = j.records(lambda r: r.get("phase") == "measure")
    finally:
        j.close()
    outcomes = {r["key"]: (r["qid"], r["outcome"], r.get("detail"), r["attempts"], r.get("docs")) for r in recs}
    attempts = sorted(
        (f["request"], f["attempt"], f["kind"], f["detail"], f["exc_type"], f["message"])
        for r in recs
        for f in r.get("failures", ())
    )
    return outcomes, attempts


def test_killed_and_resumed_seeded_stress_run_injects_the_same_faults_as_an_uninterrupted_one(
    tmp_path: Path, folder: Path
) -> None:
    faults = {"seed": 11, "error_rate": 0.2, "empty_rate": 0.1, "garbage_rate": 0.15, "latency": {"ms": 25}}
    system = {"name": "faulty", "adapter": "bm25s", "faults": faults}
    stress = {"levels": [3], "requests": 90, "warmup": 4, "retries": 1, "backoff_s": 0.001}
    configs = {}
    for name in ("whole", "resumed"):
        raw = stress_raw(folder, tmp_path / name, system=system, flush_interval_s=0.02, **stress)
        raw["stress"]["allowed_failure_rate"] = 1.0
        configs[name] = tmp_path / f"{name}.yaml"
        configs[name].write_text(yaml.safe_dump(raw))

    whole = subprocess.run([*CLI, str(configs["whole"])], env=_env(), capture_output=True, text=True, timeout=120)
    assert whole.returncode == 0, whole.stderr

    journal = tmp_path / "resumed" / "journal.jsonl"
    proc = subprocess.Popen([*CLI, str(configs["resumed"])], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_until(lambda: journal.exists() and len(_measured(journal)) >= 15, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed_at = len(_measured(journal))
    assert proc.returncode == -signal.SIGKILL and 15 <= killed_at < 90
    done = subprocess.run([*CLI, str(configs["resumed"])], env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    want, want_attempts = _fault_pattern(tmp_path / "whole")
    got, got_attempts = _fault_pattern(tmp_path / "resumed")
    assert len(want) == 90 and got == want  # request by request: the same outcome, detail, attempts and ranking
    assert got_attempts == want_attempts  # every failed attempt, retries included, with the same message
    kinds = {o for _, o, _, _, _ in want.values()}
    assert {"ok", "error", "empty", "invalid"} <= kinds  # the rehearsal really injected faults
    a = json.loads((tmp_path / "whole" / "summary.json").read_text())["levels"][0]
    b = json.loads((tmp_path / "resumed" / "summary.json").read_text())["levels"][0]
    assert b["segments"] == 2 and a["warmup"] == {"requests": 4, "failed": a["warmup"]["failed"]}
    assert b["warmup"] == a["warmup"]  # the resumed process did not warm up again, nor count it twice
    whole_summary = json.loads((tmp_path / "whole" / "summary.json").read_text())
    resumed_summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert resumed_summary["requests"] == whole_summary["requests"] == 94
    for key in ("counts", "invalid_kinds", "error_types", "retries", "recovered_by_retry", "quality"):
        assert a[key] == b[key], key


def test_server_killed_mid_run_is_recorded_partial_results_saved_exit_3(tmp_path: Path, folder: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, str(SUPPORT / "stress_support.py"), str(folder), "20"],
        env=_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    stress = None
    try:
        line = server.stdout.readline() if server.stdout else ""
        assert line.startswith("PORT "), line
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        out = tmp_path / "out"
        system = http_system(url)
        raw = stress_raw(folder, out, system=system, levels=[2], requests=40, flush_interval_s=0.02)
        cfg = tmp_path / "stress.yaml"
        cfg.write_text(yaml.safe_dump(raw))
        stress = subprocess.Popen(
            [*CLI, str(cfg)], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        journal = out / "journal.jsonl"
        _wait_until(lambda: journal.exists() and len(_measured(journal)) >= 8, stress)
        server.kill()
        server.wait(10)
        _stdout, stderr = stress.communicate(timeout=120)
    finally:
        for p in (server, stress):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
    assert stress.returncode == 3, stderr
    summary = json.loads((out / "summary.json").read_text())
    lv = summary["levels"][0]
    assert lv["completed"] == 40  # the run finished: every request was issued and recorded
    assert lv["counts"]["ok"] + lv["counts"]["short"] >= 8 and lv["counts"]["error"] > 0
    assert lv["counts"]["ok"] + lv["counts"]["short"] + lv["counts"]["empty"] + lv["counts"]["error"] == 40
    fails = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert len(fails) == lv["counts"]["error"] and all(f["exc_type"] and f["message"] for f in fails)
    assert any("Connection refused" in f["message"] for f in fails)
    first = fails[0]
    assert first["message"] in stderr and "backend failed" in stderr  # printed verbatim
    q = lv["quality"]
    assert q["of"] == 40 and q["scored"] == 40 - lv["counts"]["error"]
    answered = {line.split()[0] for line in (out / "run.trec").read_text().splitlines()}
    assert 8 <= len(answered) < 40
    statuses = [json.loads(x)["status"] for x in (out / "status.jsonl").read_text().splitlines()]
    assert statuses.count("error") == lv["counts"]["error"]
