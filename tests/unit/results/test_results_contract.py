"""The typed results contract: one writer, one reader, values and blocks in separate namespaces.

A study returns a `StudyResult`; metrics.json carries `schema_version` and keeps each system's metric values
apart from its blocks, so a metric named like a block (a plugin's `latency`) keeps its value. A folder written
by the earlier layout (tests/fixtures/results_v1, written by the code before this layout; means and blocks in
one object, CIs in aggregates.json) still reads and renders. The report of a run is built from the result in
memory: nothing is read back from the folder.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from repo_paths import V1_RESULTS
from retbench.cli import app
from retbench.io.files import json_safe
from retbench.metrics.catalog import register, unregister
from retbench.report.html import render_html
from retbench.report.markdown import report_markdown
from retbench.report.model import build_report
from retbench.results import MetricValue, StudyManifest, StudyResult, SystemResult, read_results, write_results
from retbench.studies.benchmark import run_experiment
from retbench.studies.finish import write_reports

SLICE = {"name": "scifact", "split": "test", "max_queries": 10, "corpus_sample": 300}


def write_config(tmp_path: Path, metrics: list[str]) -> Path:
    cfg = {
        "name": "contract",
        "output": str(tmp_path / "out"),
        "depth": 20,
        "metrics": metrics,
        "datasets": [SLICE],
        "systems": [
            {"name": "bm25", "adapter": "bm25s", "params": {"stopwords": "en", "stemmer": "english"}},
            {"name": "plain", "adapter": "bm25s", "params": {"k1": 0.9, "b": 0.4}},
        ],
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class ConstantLatency:
    """A plugin metric whose name is also a block's: a constant 0.25 per query."""

    name = "latency"
    cutoff = "none"
    binary = False
    description = "a constant, named like the latency block"

    def compute(self, ctx, k, params):
        return np.full(len(ctx.gm), 0.25)


@pytest.fixture
def latency_metric() -> Iterator[None]:
    register(ConstantLatency())
    try:
        yield
    finally:
        unregister("latency")


def test_a_folder_of_the_earlier_layout_reads_with_values_and_blocks_apart() -> None:
    stored = json.loads((V1_RESULTS / "metrics.json").read_text())
    assert "schema_version" not in stored  # the fixture really is the earlier layout
    res = read_results(V1_RESULTS)
    assert list(res.systems) == list(stored)
    for key, row in stored.items():
        system = res[key]
        if "error" in row:
            assert system.error == row["error"] and not system.metrics
            continue
        means = {m: v for m, v in row.items() if isinstance(v, float)}
        assert system.means() == means and means
        agg = json.loads((V1_RESULTS / "systems" / key / "aggregates.json").read_text())
        assert {m: v.ci for m, v in system.metrics.items()} == {m: (a["ci_low"], a["ci_high"]) for m, a in agg.items()}
        assert system.coverage == row["coverage"] and system.latency == row["latency"]
        assert system.reference == row.get("reference")
    assert res.evaluation("bm25").query_ids == res.run("bm25").query_ids


def test_a_folder_of_the_earlier_layout_renders_its_stored_means_in_markdown_and_html() -> None:
    stored = json.loads((V1_RESULTS / "metrics.json").read_text())
    data = build_report(read_results(V1_RESULTS))
    md, page = report_markdown(data), render_html(data)
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    for key, row in stored.items():
        line = next(ln for ln in summary.splitlines() if ln.startswith(f"| {key} |"))
        if "error" in row:
            assert "failed: " in line
        else:
            assert f"{row['ndcg@10']:.4f}" in line
    assert "Agreement with the reference system" in md and "<html" in page


def test_the_writer_and_the_reader_round_trip_and_mark_the_schema_version(tmp_path: Path) -> None:
    value = MetricValue(0.5, 0.25, 0.75, 10, 12, "gmean", {"source": "llm", "n_human": 0, "n_llm": 10})
    system = SystemResult(
        "a",
        {"ndcg@10": value, "coverage": MetricValue(0.3), "error": MetricValue(math.nan)},
        coverage={"judged": 12},
        latency={"stages": {}},
        usage={"judge": {"calls": 3}},
        error=None,
    )
    failed = SystemResult("b", error="BackendError: down")
    result = StudyResult(StudyManifest({"experiment": "x", "metrics": ["ndcg@10"]}), {"a": system, "b": failed})
    write_results(tmp_path, result)
    assert json.loads((tmp_path / "metrics.json").read_text())["schema_version"] == 2
    assert json.loads((tmp_path / "manifest.json").read_text())["schema_version"] == 2
    back = read_results(tmp_path)
    assert json_safe(back.to_dict()) == json_safe(result.to_dict())
    a = back["a"]
    assert a.metrics["ndcg@10"] == value and a.metrics["ndcg@10"].source == "llm"
    assert a.value("coverage") == 0.3 and a.coverage == {"judged": 12}  # a metric named like a block keeps both
    assert math.isnan(a.metrics["error"].value) and a.error is None
    assert back["b"].failed and back.manifest.title == "x"


def test_a_plugin_metric_named_latency_keeps_its_value_beside_the_latency_block(
    tmp_path: Path, latency_metric: None
) -> None:
    ran = CliRunner().invoke(app, ["run", str(write_config(tmp_path, ["ndcg@10", "latency"])), "--quiet"])
    assert ran.exit_code == 0, ran.output
    out = tmp_path / "out"
    stored = json.loads((out / "metrics.json").read_text())["systems"]["bm25"]
    assert stored["metrics"]["latency"]["value"] == 0.25
    assert (
        set(stored["latency"]) == {"stages", "suite_seconds", "query"}
        and stored["latency"]["stages"]["search"]["n"] == 10
    )
    summary = (out / "report.md").read_text().split("## Summary", 1)[1].split("\n## ", 1)[0]
    header = next(ln for ln in summary.splitlines() if ln.startswith("| system"))
    row = next(ln for ln in summary.splitlines() if ln.startswith("| bm25 |"))
    assert "latency" in header and "0.2500" in row
    assert read_results(out)["bm25"].value("latency") == 0.25


@contextmanager
def opened_under(root: Path) -> Iterator[list[str]]:
    """Every file under `root` the process opens while inside (an audit hook: nothing is replaced or mocked)."""
    seen: list[str] = []
    active = [True]
    prefix = str(root.resolve())

    def hook(event: str, args: tuple) -> None:
        if active[0] and event == "open" and isinstance(args[0], (str, Path)):
            path = str(Path(args[0]).resolve()) if not str(args[0]).startswith(prefix) else str(args[0])
            if path.startswith(prefix):
                seen.append(path)

    sys.addaudithook(hook)  # audit hooks cannot be removed: this one switches itself off on leaving
    try:
        yield seen
    finally:
        active[0] = False


def test_the_report_of_a_run_reads_nothing_back_from_the_results_folder(tmp_path: Path) -> None:
    outcome = run_experiment(write_config(tmp_path, ["ndcg@10", "recall@5"]), log=lambda _: None, history=False)
    out = tmp_path / "out"
    first = (out / "report.md").read_text()
    kept = tmp_path / "kept"
    shutil.move(out, kept)  # nothing of the folder is left to read
    out.mkdir()
    with opened_under(tmp_path) as seen:
        written = write_reports(out, outcome, lambda m: pytest.fail(m))
    assert written == ["report.md", "report.html"]
    assert all(Path(p).parent == out for p in seen), seen  # only the two reports (and their temp files)
    assert (out / "report.md").read_text() == first


def test_cells_finished_by_the_earlier_layout_are_skipped_and_keep_their_intervals(tmp_path: Path) -> None:
    out = tmp_path / "old"
    shutil.copytree(V1_RESULTS, out)
    manifest = json.loads((out / "manifest.json").read_text())
    config = yaml.safe_load(manifest["config"]["text"])
    config["output"] = str(out)
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(config))
    ran = CliRunner().invoke(app, ["run", str(tmp_path / "old.yaml"), "--quiet", "--no-history"])
    assert ran.exit_code == 3, ran.output  # the broken system still fails; the others were not run again
    assert "bm25: finished earlier, skipped" in ran.output and "plain: finished earlier, skipped" in ran.output
    res = read_results(out)
    for key in ("bm25", "plain"):
        agg = json.loads((V1_RESULTS / "systems" / key / "aggregates.json").read_text())
        assert {m: (v.value, v.ci) for m, v in res[key].metrics.items()} == {
            m: (a["mean"], (a["ci_low"], a["ci_high"])) for m, a in agg.items()
        }
