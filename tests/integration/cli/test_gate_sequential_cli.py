"""`retbench gate` with `sequential: true` and `retbench compare --sequential` as CI runs them (subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import abdata

CLI = [sys.executable, "-m", "retbench.cli"]


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return abdata.scifact_results(tmp_path_factory.mktemp("seq"))


def _sides(results: Path, baseline: str, candidate: str) -> list[str | Path]:
    return [
        "--baseline",
        results,
        "--baseline-system",
        baseline,
        "--candidate",
        results,
        "--candidate-system",
        candidate,
    ]


def test_a_sequential_gate_blocks_a_drop_its_sequence_shows_and_lets_one_it_cannot_show_yet_pass(results, tmp_path):
    criteria = tmp_path / "criteria.yaml"
    criteria.write_text(
        "sequential: true\n"
        "gates:\n"
        "  - {name: ndcg10, metric: nDCG@10, regression_max: 0.02, require_significance: true}\n"
        "  - {name: mrr10, metric: MRR@10, regression_max: 0.02, require_significance: true}\n"
    )
    verdict, comment = tmp_path / "v.json", tmp_path / "c.md"
    res = _run(
        "gate", "--criteria", criteria, *_sides(results, "bm25", "bm25_weak"), "--json", verdict, "--comment", comment
    )
    assert res.returncode == 1, res.stderr
    ndcg, mrr = json.loads(verdict.read_text())["gates"]
    assert ndcg["blocks"] and ndcg["sequence"]["delta"]["high"] < 0
    assert (
        mrr["passed"]
        and mrr["checks"][0]["waived"]
        and mrr["sequence"]["delta"]["low"] < 0 <= mrr["sequence"]["delta"]["high"]
    )
    assert "may be looked at after every query" in comment.read_text()


def test_compare_sequential_prints_each_deltas_sequence_and_writes_it_to_json(results, tmp_path):
    out = tmp_path / "cmp.json"
    res = _run("compare", results, "--systems", "bm25,bm25_weak", "--metrics", "ndcg@10", "--sequential", "--json", out)
    assert res.returncode == 0, res.stderr
    assert "Δ confidence sequence (95%, 300 queries)" in res.stdout and "anytime-valid" in res.stdout
    metric = json.loads(out.read_text())["pairs"][0]["metrics"][0]
    assert metric["sequence"]["delta"]["anytime_valid"] is True
    assert metric["sequence"]["delta"]["low"] <= metric["delta"] <= metric["sequence"]["delta"]["high"]
