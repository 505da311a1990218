"""Reports treat user text as text and never print a mean beside another number's interval.

An experiment named with HTML reaches report.md and report.html as inert text; a results folder whose
metrics.json and aggregates.json disagree (a NaN mean there, an interval here) is refused naming the metric.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from retbench.cli import app

runner = CliRunner()
PAYLOAD = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("user_text")
    cfg = {
        "name": f"exp {PAYLOAD} & co",
        "output": str(root / "out"),
        "metrics": ["ndcg@10", "recall@10"],
        "datasets": [{"name": "scifact", "max_queries": 6, "corpus_sample": 120}],
        "systems": [{"name": "bm25", "adapter": "bm25s"}, {"name": "weak", "adapter": "bm25s", "params": {"k1": 0.1}}],
    }
    (root / "exp.yaml").write_text(yaml.safe_dump(cfg))
    res = runner.invoke(app, ["run", str(root / "exp.yaml"), "--quiet", "--no-history"])
    assert res.exit_code == 0, res.output
    return root / "out"


def test_an_experiment_name_holding_html_is_inert_text_in_both_reports(results: Path, tmp_path: Path):
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(results), "--markdown", str(md), "--html", str(html)])
    assert res.exit_code == 0, res.output
    text = md.read_text()
    assert "# exp &lt;img src=x onerror=alert(1)&gt; &amp; co" in text and PAYLOAD not in text
    page = html.read_text()
    assert PAYLOAD not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    written = (results / "report.md").read_text() if (results / "report.md").is_file() else ""
    assert PAYLOAD not in written


def test_a_nan_mean_never_prints_beside_the_interval_stored_with_it(results: Path, tmp_path: Path):
    import shutil

    copy = tmp_path / "edited"
    shutil.copytree(results, copy)
    doc = json.loads((copy / "metrics.json").read_text())
    doc["systems"]["bm25"]["metrics"]["ndcg@10"]["value"] = None  # its stored interval stays finite
    (copy / "metrics.json").write_text(json.dumps(doc))
    res = runner.invoke(app, ["report", str(copy), "--markdown", str(tmp_path / "r.md")])
    assert res.exit_code == 0, res.output
    row = next(line for line in (tmp_path / "r.md").read_text().splitlines() if line.startswith("| bm25 |"))
    assert "| n/a (no query scored) |" in row and "nan" not in row  # the cell holds no interval


def test_an_earlier_layout_folder_whose_two_files_disagree_on_a_mean_is_refused_naming_it(tmp_path: Path):
    import shutil

    from repo_paths import V1_RESULTS
    from retbench.errors import InputError
    from retbench.results import load_results

    copy = tmp_path / "edited"
    shutil.copytree(V1_RESULTS, copy)
    metrics = json.loads((copy / "metrics.json").read_text())
    metrics["bm25"]["ndcg@10"] = None  # the mean and interval in aggregates.json stay finite
    (copy / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(InputError, match=r"aggregates.json: field 'ndcg@10': mean .* but None in metrics.json"):
        load_results(copy)
