"""`retbench gate --labels STUDY` as CI runs it (a subprocess): exit 0 when the candidate passes, 1 when the study's
interval says it regressed, 2 for a flag the study makes meaningless; the comment file names the labels."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from label_gate_data import build_study
from retbench.studies.labels.answer import estimate_study

GATE = [sys.executable, "-m", "retbench.cli", "gate"]


def _gate(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GATE, *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def study(scifact, tmp_path_factory) -> Path:
    return build_study(scifact, tmp_path_factory.mktemp("cli"))


def test_gate_labels_fails_a_significant_drop_and_passes_the_better_candidate(study, tmp_path):
    criteria = tmp_path / "criteria.yaml"
    criteria.write_text(
        "gates:\n  - {name: ndcg10, metric: nDCG@10, regression_max: 0.02, require_significance: true}\n"
    )
    comment = tmp_path / "comment.md"
    failed = _gate("--criteria", criteria, "--labels", study, "--comment", comment, "--json", tmp_path / "v.json")
    assert failed.returncode == 1, failed.stderr
    n = estimate_study(study)["systems"]["shifted"]
    assert f"PPI, {n['n_human']:,} human / {n['n_llm']:,} LLM labels, judged@10 1.00" in comment.read_text()
    assert "gate failed: ndcg10 (nDCG@10) dropped" in failed.stderr
    # the study's better system against the worse one passes the same criteria
    passed = _gate(
        "--criteria", criteria, "--labels", study, "--candidate-system", "bm25", "--baseline-system", "shifted"
    )
    assert passed.returncode == 0, passed.stderr
    assert "Retrieval quality gate: passes" in passed.stdout


def test_gate_labels_refuses_a_candidate_path_and_a_gate_on_another_metric(study, tmp_path):
    criteria = tmp_path / "criteria.yaml"
    criteria.write_text("gates:\n  - {name: recall@5, threshold: 0.5}\n")
    both = _gate("--criteria", criteria, "--labels", study, "--candidate", tmp_path)
    assert both.returncode == 2 and "--candidate" in both.stderr
    other = _gate("--criteria", criteria, "--labels", study)
    assert other.returncode == 2 and "criteria.yaml:2" in other.stderr and "estimates only" in other.stderr
