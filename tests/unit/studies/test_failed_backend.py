"""A failed backend never costs the report: a system that fails as a whole is shown as a failure beside the others.

Real failures only: an http store pointed at a loopback port nobody listens on, plugin factories that
raise or return the wrong type. Every run still writes metrics.json, report.md and report.html, and
`retbench report` reads the directory; the exit code says what failed (3 a backend, 2 the config).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import repo_paths
from retbench.cli import app
from retbench.results import read_results

PLUGINS = str(repo_paths.PLUGINS)
runner = CliRunner()
BM25 = {"name": "bm25", "adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75}}
SLICE = {"name": "scifact", "split": "test", "max_queries": 12, "corpus_sample": 200}


@pytest.fixture(autouse=True)
def _plugins_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(PLUGINS)


def closed_port() -> int:
    """A loopback port that was free a moment ago and that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def store_at_closed_port() -> dict:
    return {"name": "store", "adapter": "http", "params": {"url": f"http://127.0.0.1:{closed_port()}/search"}}


def write_config(tmp_path: Path, systems: list[dict], datasets: list[dict] | None = None) -> Path:
    cfg = {
        "name": "t",
        "output": str(tmp_path / "out"),
        "depth": 20,
        "metrics": ["ndcg@10", "recall@5"],
        "datasets": datasets or [SLICE],
        "systems": systems,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def summary_rows(report_md: str) -> dict[str, str]:
    """system -> its row of the report's Summary table."""
    section = report_md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| system")]
    return {row.split(" | ")[0].removeprefix("| "): row for row in rows}


def test_the_only_system_failing_still_writes_a_report_that_report_can_read(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(write_config(tmp_path, [store_at_closed_port()])), "--quiet"])
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output and "IndexError" not in result.output
    out = tmp_path / "out"
    assert "unreachable" in str(read_results(out)["store"].error)
    md = (out / "report.md").read_text()
    assert "failed: BackendError: retrieval endpoint" in summary_rows(md)["store"]
    assert "failed" in (out / "report.html").read_text()
    again = runner.invoke(app, ["report", str(out)])
    assert again.exit_code == 0, again.output


def test_a_failed_first_system_is_shown_beside_the_scored_one_in_config_order(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(write_config(tmp_path, [store_at_closed_port(), BM25])), "--quiet"])
    assert result.exit_code == 3, result.output
    out = tmp_path / "out"
    res = read_results(out)
    rows = summary_rows((out / "report.md").read_text())
    assert list(rows) == ["store", "bm25"]
    assert "failed:" in rows["store"] and "— | —" in rows["store"]
    assert f"{res['bm25'].value('ndcg@10'):.4f}" in rows["bm25"] and "scored 12 of 12" in rows["bm25"]


def test_a_factory_that_raises_is_a_backend_failure_and_the_others_still_run(tmp_path: Path) -> None:
    broken = {"name": "broken", "adapter": "toy_retrievers:unreachable_store"}
    result = runner.invoke(app, ["run", str(write_config(tmp_path, [broken, BM25])), "--quiet"])
    assert result.exit_code == 3, result.output
    assert "Connection refused: the vector store" in result.output
    rows = summary_rows((tmp_path / "out" / "report.md").read_text())
    assert "failed: ConnectionRefusedError" in rows["broken"] and "scored 12 of 12" in rows["bm25"]


def test_a_factory_that_returns_the_wrong_type_is_a_config_error_after_the_report(tmp_path: Path) -> None:
    wrong = {"name": "wrong", "adapter": "toy_retrievers:not_a_retriever"}
    result = runner.invoke(app, ["run", str(write_config(tmp_path, [BM25, wrong])), "--quiet"])
    assert result.exit_code == 2, result.output
    assert "returned dict, not a Retriever" in result.output and "Traceback" not in result.output
    rows = summary_rows((tmp_path / "out" / "report.md").read_text())
    assert "failed: ConfigError" in rows["wrong"] and "scored 12 of 12" in rows["bm25"]


def test_a_suite_with_one_system_per_dataset_gets_a_report(tmp_path: Path) -> None:
    train = {**SLICE, "split": "train"}
    result = runner.invoke(app, ["run", str(write_config(tmp_path, [BM25], [SLICE, train])), "--quiet"])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Leaderboard" in md and set(summary_rows(md)) == {"scifact/bm25", "scifact-train/bm25"}
    assert (tmp_path / "out" / "report.html").is_file()


def test_runs_shorter_than_depth_are_counted_in_coverage_and_shown(tmp_path: Path) -> None:
    fewer = {"name": "fewer", "adapter": "toy_retrievers:ReturnsFewer", "params": {"returns": 5}}
    result = runner.invoke(app, ["run", str(write_config(tmp_path, [BM25, fewer])), "--quiet"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    metrics = {s.name: {"coverage": s.coverage} for s in read_results(out)}
    runs = {s: (out / "systems" / s / "run.trec").read_text().splitlines() for s in ("bm25", "fewer")}
    for system, lines in runs.items():
        per_query: dict[str, int] = {}
        for line in lines:
            per_query[line.split()[0]] = per_query.get(line.split()[0], 0) + 1
        expected = sum(1 for n in per_query.values() if n < 20) + (12 - len(per_query))  # unanswered: empty
        assert metrics[system]["coverage"]["short"] == expected
        assert metrics[system]["coverage"]["depth"] == 20
    assert metrics["fewer"]["coverage"]["short"] == 12
    md = (out / "report.md").read_text()
    assert "returned < depth" in md and "| 12 (depth 20) |" in md
    assert "returned &lt; depth" in (out / "report.html").read_text()


def test_report_refuses_a_failed_system_as_baseline_naming_the_scored_ones(tmp_path: Path) -> None:
    other = {**BM25, "name": "bm25-b"}
    runner.invoke(app, ["run", str(write_config(tmp_path, [store_at_closed_port(), BM25, other])), "--quiet"])
    result = runner.invoke(app, ["report", str(tmp_path / "out"), "--baseline", "store"])
    assert result.exit_code == 2, result.output
    assert "system 'store' failed as a whole" in result.output and "bm25, bm25-b" in result.output
    fine = runner.invoke(app, ["report", str(tmp_path / "out"), "--baseline", "bm25-b"])
    assert fine.exit_code == 0, fine.output


def test_a_system_that_fails_while_searching_is_recorded_and_the_next_one_runs(tmp_path: Path) -> None:
    lost = {"name": "lost", "adapter": "toy_retrievers:LosesItsNode"}
    result = runner.invoke(app, ["run", str(write_config(tmp_path, [lost, BM25])), "--quiet"])
    assert result.exit_code == 3, result.output
    assert "lost: backend failed while searching: ConnectionResetError" in result.output
    rows = summary_rows((tmp_path / "out" / "report.md").read_text())
    assert "failed: ConnectionResetError" in rows["lost"] and "scored 12 of 12" in rows["bm25"]
