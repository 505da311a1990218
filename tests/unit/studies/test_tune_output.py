"""What `retbench tune` prints while and after it runs, on a small corpus written to tmp_path.

While the settings are indexed and searched it shows the progress bars `retbench run` shows (one per stage
of each setting); its candidate table never prints percentiles for settings timed as batches ("not measured
per query", as the run report says) and states the timing and the caches' state of every setting.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from retbench.cli import app

runner = CliRunner()
N = 30
BAR = re.compile(r"^(index|search) (\S+)\s.*\b(\d+)/(\d+)\b")


@pytest.fixture
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RETBENCH_HISTORY", str(tmp_path / "history.sqlite"))
    data = tmp_path / "data"
    (data / "qrels").mkdir(parents=True)
    docs = "".join(json.dumps({"_id": f"d{i}", "title": "", "text": f"word{i} common text"}) + "\n" for i in range(N))
    (data / "corpus.jsonl").write_text(docs)
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"word{i}"}) + "\n" for i in range(N))
    )
    (data / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(N))
    )
    exp = {
        "name": "t",
        "output": str(tmp_path / "run"),
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": str(data), "split": "test"}],
        "systems": [{"name": "bm25", "adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75}}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    tune = {"experiment": "exp.yaml", "system": "bm25", "metric": "ndcg@10", "folds": 3, "grid": {"params.k1": [0.9]}}
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(tune))
    return tmp_path


def bars(output: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(stage, system) -> (done, total) of each progress bar's last state in the output."""
    found = {}
    for line in output.splitlines():
        m = BAR.match(line.strip())
        if m:
            found[(m[1], m[2])] = (int(m[3]), int(m[4]))
    return found


def test_tune_shows_the_progress_bars_run_shows_for_every_setting(configs: Path) -> None:
    ran = runner.invoke(app, ["run", str(configs / "exp.yaml")])
    assert ran.exit_code == 0, ran.output
    assert bars(ran.output) == {("index", "bm25"): (N, N), ("search", "bm25"): (N, N)}
    tuned = runner.invoke(app, ["tune", str(configs / "tune.yaml"), "--output", str(configs / "tune")])
    assert tuned.exit_code == 0, tuned.output
    # the same bars, one pair per setting (the derived experiment names them bm25-00, bm25-01)
    assert bars(tuned.output) == {(stage, f"bm25-0{i}"): (N, N) for stage in ("index", "search") for i in (0, 1)}
    quiet = runner.invoke(app, ["tune", str(configs / "tune.yaml"), "--output", str(configs / "q"), "--quiet"])
    assert quiet.exit_code == 0 and bars(quiet.output) == {}


def test_tune_never_prints_percentiles_for_settings_timed_as_batches(configs: Path) -> None:
    tuned = runner.invoke(app, ["tune", str(configs / "tune.yaml"), "--output", str(configs / "tune"), "--quiet"])
    assert tuned.exit_code == 0, tuned.output
    rows = [line for line in tuned.output.splitlines() if re.match(r"\s+\[\d\]\s", line)]
    assert len(rows) == 2
    for row in rows:  # bm25s answers in batches (64 by default): a batch mean, no p50/p95
        assert row.count("not measured per query") == 2 and "batch mean (batches of up to 30)" in row
    md = (configs / "tune" / "report.md").read_text()
    table = [line for line in md.splitlines() if line.startswith("| [")]
    assert len(table) == 2 and all(line.split(" | ")[5:7] == ["not measured per query"] * 2 for line in table)
    assert "same cache state" in md
    html = (configs / "tune" / "report.html").read_text()
    assert "p50 latency" not in html and "mean latency (batch mean)" in html
