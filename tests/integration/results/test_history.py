"""Every `retbench run` lands in a local SQLite history; `retbench history` shows the trend and
`retbench gate --baseline history:...` takes its baseline from it. Concurrent writers lose nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from retbench.cli import app
from retbench.results import history

runner = CliRunner()
BM25 = {"name": "bm25", "adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75}}
WEAK = {"name": "weak", "adapter": "bm25s", "params": {"k1": 0.1, "b": 0.0}}


def git(cwd: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", *args]
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project: a git repository holding the experiment config; the history lives beside it."""
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.setenv(history.ENV, str(tmp_path / "history.sqlite"))
    git(root, "init", "-q")
    return root


def write_config(root: Path, systems: list[dict], out: str = "out") -> Path:
    cfg = {
        "name": "hist",
        "output": str(root / out),
        "depth": 20,
        "metrics": ["recall@5", "mrr@10"],
        "datasets": [{"name": "scifact", "max_queries": 12, "corpus_sample": 150}],
        "systems": systems,
    }
    path = root / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_runs_register_with_commit_fingerprints_cis_and_show_as_a_trend(project: Path, tmp_path: Path):
    cfg = write_config(project, [BM25])
    git(project, "add", "exp.yaml")
    git(project, "commit", "-qm", "first")
    head = git(project, "rev-parse", "HEAD")
    first = runner.invoke(app, ["run", str(cfg), "--quiet", "--tag", "v1"])
    assert first.exit_code == 0, first.output
    assert "history: run 1 in" in first.output
    cfg = write_config(project, [BM25, WEAK])  # an uncommitted change to the config
    second = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert second.exit_code == 0, second.output

    rows = history.entries()
    assert [e.id for e in rows] == [1, 2]
    one, two = rows
    assert one.git_commit == head and one.git_dirty is False and one.tag == "v1"
    assert two.git_commit == head and two.git_dirty is True
    assert one.config_hash != two.config_hash
    manifest = json.loads((project / "out" / "manifest.json").read_text())
    assert two.datasets[0]["qrels_fingerprint"] == manifest["datasets"][0]["qrels_fingerprint"]
    assert two.datasets[0]["corpus_fingerprint"] == manifest["datasets"][0]["corpus_fingerprint"]
    metrics = json.loads((project / "out" / "metrics.json").read_text())
    aggregates = json.loads((project / "out" / "systems" / "weak" / "aggregates.json").read_text())
    mean, lo, hi = two.scores["weak"]["recall@5"]
    assert mean == metrics["weak"]["recall@5"]
    assert (lo, hi) == (aggregates["recall@5"]["ci_low"], aggregates["recall@5"]["ci_high"])
    assert two.coverage["weak"]["judged"] == 12

    shown = runner.invoke(app, ["history", "--metric", "recall@5", "--html", str(tmp_path / "trend.html")])
    assert shown.exit_code == 0, shown.output
    assert f"{metrics['bm25']['recall@5']:.4f}" in shown.output and head[:10] in shown.output
    assert "v1" in shown.output
    page = (tmp_path / "trend.html").read_text()
    assert page.count('class="series"') == 2 and "<script" not in page
    only = runner.invoke(app, ["history", "--system", "weak", "--json"])
    data = json.loads(only.output)
    assert [sorted(e["scores"]) for e in data] == [[], ["weak"]]


def test_gate_takes_its_baseline_from_the_history(project: Path, tmp_path: Path):
    criteria = tmp_path / "criteria.yaml"
    criteria.write_text(
        yaml.safe_dump({"gates": [{"name": "recall", "metric": "recall@5", "threshold": 0.0, "regression_max": 0.05}]})
    )
    cfg = write_config(project, [BM25])
    assert runner.invoke(app, ["run", str(cfg), "--quiet"]).exit_code == 0
    no_pass = runner.invoke(app, ["gate", "--criteria", str(criteria), "--candidate", str(project / "out"),
                                  "--baseline", "history:last-pass"])  # fmt: skip
    assert no_pass.exit_code == 2 and "no run in the history passed a gate" in no_pass.output
    # a gate without baseline passes and is recorded: that run becomes last-pass
    floor = tmp_path / "floor.yaml"
    floor.write_text(yaml.safe_dump({"gates": [{"name": "recall", "metric": "recall@5", "threshold": 0.0}]}))
    first = runner.invoke(app, ["gate", "--criteria", str(floor), "--candidate", str(project / "out")])
    assert first.exit_code == 0, first.output
    assert history.resolve("history:last-pass").id == 1
    stored = history.evaluations(history.resolve("history:last-pass"))[0].values.copy()

    # the same output folder is overwritten by a much weaker system (BM25's ranks 11-20 replayed from a
    # run file): the baseline is the stored snapshot, not the folder
    lines = (project / "out" / "systems" / "bm25" / "run.trec").read_text().splitlines()
    worse = [line for line in lines if int(line.split()[3]) > 10]
    (tmp_path / "worse.trec").write_text("\n".join(worse) + "\n")
    cfg = write_config(
        project, [{"name": "bm25", "adapter": "runfile", "params": {"path": str(tmp_path / "worse.trec")}}]
    )
    assert runner.invoke(app, ["run", str(cfg), "--quiet", "--force"]).exit_code == 0
    gated = runner.invoke(app, ["gate", "--criteria", str(criteria), "--candidate", str(project / "out"),
                                "--baseline", "history:last-pass"])  # fmt: skip
    assert "history run 1" in gated.output
    assert gated.exit_code == 1, gated.output  # recall@5 fell by more than 5 points
    assert history.entries()[-1].gate == "fail"
    assert (history.evaluations(history.resolve("history:1"))[0].values == stored).all()
    by_id = runner.invoke(app, ["gate", "--criteria", str(criteria), "--candidate", str(project / "out"),
                                "--baseline", "history:2"])  # fmt: skip
    assert by_id.exit_code == 0, by_id.output  # against itself: no regression


def test_gate_refuses_a_history_baseline_computed_on_other_data(project: Path, tmp_path: Path):
    floor = tmp_path / "floor.yaml"
    floor.write_text(yaml.safe_dump({"gates": [{"name": "recall", "metric": "recall@5", "threshold": 0.0}]}))
    assert runner.invoke(app, ["run", str(write_config(project, [BM25])), "--quiet"]).exit_code == 0
    assert runner.invoke(app, ["gate", "--criteria", str(floor), "--candidate", str(project / "out")]).exit_code == 0
    cfg = yaml.safe_load((project / "exp.yaml").read_text())
    cfg["datasets"][0]["corpus_sample"] = 300  # another corpus (and so other numbers) under the same name
    cfg["output"] = str(project / "out2")
    (project / "exp.yaml").write_text(yaml.safe_dump(cfg))
    assert runner.invoke(app, ["run", str(project / "exp.yaml"), "--quiet"]).exit_code == 0
    args = ["gate", "--criteria", str(floor), "--candidate", str(project / "out2"), "--baseline", "history:1"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "different data" in refused.output, refused.output
    assert "history run 1" in refused.output and "corpus" in refused.output
    allowed = runner.invoke(app, [*args, "--allow-different-data"])
    assert allowed.exit_code == 0 and "note: --allow-different-data" in allowed.output, allowed.output


WRITER = """
import sys
from retbench.results import history
for _ in range(int(sys.argv[3])):
    history.register(sys.argv[1], path=sys.argv[2], tag=sys.argv[4])
"""


def test_concurrent_runs_writing_the_history_lose_nothing(project: Path, tmp_path: Path):
    cfg = write_config(project, [BM25, WEAK])
    assert runner.invoke(app, ["run", str(cfg), "--quiet", "--no-history"]).exit_code == 0
    db = tmp_path / "shared.sqlite"
    writers, each = 6, 5
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(project / "out"), str(db), str(each), f"w{i}"])
        for i in range(writers)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0] * writers
    rows = history.entries(db)
    assert len(rows) == writers * each
    assert sorted({e.id for e in rows}) == list(range(1, writers * each + 1))
    assert {e.tag for e in rows} == {f"w{i}" for i in range(writers)}
    assert all(sorted(e.scores) == ["bm25", "weak"] and len(e.scores["weak"]) == 2 for e in rows)
    assert all(len(history.evaluations(e, db)) == 2 for e in rows[:3])


# -- a damaged history is one line, and reading one writes nothing ---------------------------------------
@pytest.mark.parametrize("damage", ["not a database", "truncated"])
def test_history_and_a_history_baseline_on_a_damaged_file_are_one_line_exit_2(project: Path, tmp_path: Path, damage):
    cfg = write_config(project, [BM25])
    assert runner.invoke(app, ["run", str(cfg), "--quiet"]).exit_code == 0
    hist = tmp_path / "history.sqlite"
    if damage == "truncated":
        hist.write_bytes(hist.read_bytes()[:3000])
    else:
        hist.write_bytes(b"garbage, not SQLite " * 200)
    shown = runner.invoke(app, ["history", "--history-file", str(hist)])
    assert shown.exit_code == 2, shown.output
    assert f"{hist}: cannot read the history" in shown.output and "move it aside" in shown.output
    crit = tmp_path / "criteria.yaml"
    crit.write_text("gates:\n  - {name: floor, metric: recall@5, regression_max: 0.5}\n")
    args = ["gate", "--criteria", str(crit), "--candidate", str(project / "out"), "--baseline", "history:last"]
    gated = runner.invoke(app, [*args, "--history-file", str(hist)])
    assert gated.exit_code == 2, gated.output
    assert "cannot read the history" in gated.output and "Traceback" not in gated.output


def test_reading_the_history_never_writes_it(project: Path, tmp_path: Path):
    import sqlite3

    other = tmp_path / "someone_elses.sqlite"  # an SQLite file that is no retbench history
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE notes (text TEXT)")
    before = other.read_bytes()
    shown = runner.invoke(app, ["history", "--history-file", str(other)])
    assert shown.exit_code == 2 and "no such table: runs" in shown.output
    assert other.read_bytes() == before  # no retbench tables were created in it
    with sqlite3.connect(other) as con:
        assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["notes"]

    cfg = write_config(project, [BM25])
    assert runner.invoke(app, ["run", str(cfg), "--quiet"]).exit_code == 0
    hist = tmp_path / "history.sqlite"
    before = hist.read_bytes()
    assert runner.invoke(app, ["history", "--history-file", str(hist)]).exit_code == 0
    assert runner.invoke(app, ["history", "--history-file", str(hist), "--json"]).exit_code == 0
    assert hist.read_bytes() == before


def test_a_history_baseline_searched_to_another_depth_is_said_and_refused_where_it_matters(
    project: Path, tmp_path: Path
):
    def config(depth: int, out: str) -> Path:
        cfg = yaml.safe_load(write_config(project, [BM25], out=out).read_text())
        cfg.update(depth=depth, metrics=["recall@5", "map"])
        path = project / f"{out}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    assert runner.invoke(app, ["run", str(config(20, "deep")), "--quiet"]).exit_code == 0
    assert runner.invoke(app, ["run", str(config(10, "shallow")), "--quiet", "--no-history"]).exit_code == 0
    crit = tmp_path / "criteria.yaml"
    gate = ["gate", "--criteria", str(crit), "--candidate", str(project / "shallow"), "--baseline", "history:last"]
    crit.write_text("gates:\n  - {name: early, metric: recall@5, regression_max: 0.5}\n")
    ran = runner.invoke(app, gate)
    assert ran.exit_code == 0, ran.output  # recall@5 is the same at depth 10 and 20: only said
    assert "note: results differ in depth 20 (baseline bm25) vs 10 (candidate bm25)" in ran.output
    crit.write_text("gates:\n  - {name: all, metric: map, regression_max: 0.5}\n")
    ran = runner.invoke(app, gate)
    assert ran.exit_code == 2, ran.output
    assert "depth 20 (baseline bm25) vs 10 (candidate bm25): map looks deeper than 10" in ran.output
