"""The typed blocks of a system result (results/blocks.py) are the JSON objects metrics.json stores, unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

from repo_paths import V1_RESULTS
from retbench.evaluation import Evaluation
from retbench.results.blocks import Breakdown, JudgeBlock, RerankSummary
from retbench.results.model import MetricValue, StudyManifest, StudyResult, SystemResult
from retbench.results.read import read_results
from retbench.results.write import write_results
from retbench.studies.cell import breakdown


def _result() -> StudyResult:
    judge: JudgeBlock = {
        "calls": 4,
        "cached": 1,
        "input_tokens": 120,
        "output_tokens": 8,
        "retries": 0,
        "cost": 0.0,
        "tokens_estimated": False,
        "statuses": {"ok": 3, "unparseable": 1},
        "metrics": {"faithfulness": {"judged": 3, "of": 4, "statuses": {"ok": 3, "unparseable": 1}}},
    }
    groups: Breakdown = {"easy": {"n": 2, "means": {"ndcg@10": 0.75}, "rates": {"error": 0.0}}}
    rerank: RerankSummary = {
        "depth": 20,
        "ceiling": {"metric": "recall@20", "value": 0.9},
        "vs_first_stage": {
            "ndcg@10": {"delta": 0.1, "ci": [0.05, None], "p": 0.02, "wins": 3, "ties": 1, "losses": 0, "n": 4}
        },
    }
    system = SystemResult(
        "a",
        {"ndcg@10": MetricValue(0.6, 0.5, 0.7, 4)},
        coverage={"judged": 4},
        latency={"stages": {}},
        judge=judge,
        first_stage={"ndcg@10": MetricValue(0.5, 0.4, 0.6, 4)},
        rerank=rerank,
        breakdown=groups,
    )
    return StudyResult(StudyManifest({"experiment": "blocks"}), {"a": system})


def test_typed_blocks_written_read_back_and_written_again_give_the_same_bytes(tmp_path: Path) -> None:
    write_results(tmp_path / "one", _result())
    back = read_results(tmp_path / "one")
    assert back["a"].judge == _result()["a"].judge and back["a"].rerank == _result()["a"].rerank
    write_results(tmp_path / "two", back)
    for name in ("metrics.json", "manifest.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_a_results_folder_of_the_earlier_layout_rewrites_to_the_same_bytes_twice(tmp_path: Path) -> None:
    folder = tmp_path / "v1"
    shutil.copytree(V1_RESULTS, folder)
    first = read_results(folder)
    write_results(tmp_path / "once", first)
    write_results(tmp_path / "twice", read_results(tmp_path / "once"))
    assert (tmp_path / "once" / "metrics.json").read_bytes() == (tmp_path / "twice" / "metrics.json").read_bytes()
    assert first.systems.keys() == read_results(tmp_path / "twice").systems.keys()


def test_a_breakdown_block_holds_each_groups_size_means_and_failure_rates() -> None:
    ev = Evaluation("s", ["ndcg@10"], ["q1", "q2", "q3"], [[1.0], [0.5], [0.0]], ["ok", "ok", "error"])
    block = breakdown(ev, {"all": ["q1", "q2", "q3"], "two": ["q1", "q2"], "none": ["q9"]})
    assert list(block) == ["all", "two"]  # an empty group is left out
    assert block["two"]["n"] == 2 and block["two"]["means"] == {"ndcg@10": 0.75}
    assert "rates" not in block["all"]  # rates need the run's statuses
