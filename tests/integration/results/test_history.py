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
from retbench.results import history, history_read
from stored import flat

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
    # bm25's cell was skipped (finished earlier): the history already holds it, so it is no new point
    assert "history: unchanged, nothing searched: bm25 (run 1)" in second.output

    rows = history_read.entries()
    assert [e.id for e in rows] == [1, 2]
    one, two = rows
    assert one.git_commit == head and one.git_dirty is False and one.tag == "v1"
    assert two.git_commit == head and two.git_dirty is True
    assert one.config_hash != two.config_hash
    manifest = json.loads((project / "out" / "manifest.json").read_text())
    assert two.datasets[0]["qrels_fingerprint"] == manifest["datasets"][0]["qrels_fingerprint"]
    assert two.datasets[0]["corpus_fingerprint"] == manifest["datasets"][0]["corpus_fingerprint"]
    metrics = flat(project / "out")
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
    assert [sorted(e["scores"]) for e in data] == [["weak"]]  # runs without a point of `weak` are left out


def test_the_readme_last_pass_flow_starts_on_thresholds_then_gates_each_run_against_the_one_before(
    project: Path, tmp_path: Path
):
    criteria = tmp_path / "criteria.yaml"
    criteria.write_text(
        yaml.safe_dump({"gates": [{"name": "recall", "metric": "recall@5", "threshold": 0.0, "regression_max": 0.05}]})
    )
    gate = ["gate", "--criteria", str(criteria), "--candidate", str(project / "out"), "--baseline", "history:last-pass"]
    cfg = write_config(project, [BM25])
    assert runner.invoke(app, ["run", str(cfg), "--quiet"]).exit_code == 0
    # first use: nothing has passed yet, so the gate says so, checks the threshold only and records its verdict
    first = runner.invoke(app, gate)
    assert first.exit_code == 0, first.output
    assert (
        "note: no earlier run of experiment 'hist' on scifact/test (12 queries) with system 'bm25' passed a gate: "
        "this gate checks thresholds only" in first.output
    )
    assert "history: bm25 pass recorded on run 1" in first.output
    assert history_read.entries()[0].gates == {"bm25": "pass"}
    stored = history_read.evaluations(history_read.resolve("history:1"))[0].values.copy()

    # the same output folder is overwritten by a much weaker system (BM25's ranks 11-20 replayed from a
    # run file): the baseline is the stored snapshot of run 1, not the folder, and not run 2 itself
    lines = (project / "out" / "systems" / "bm25" / "run.trec").read_text().splitlines()
    worse = [line for line in lines if int(line.split()[3]) > 10]
    (tmp_path / "worse.trec").write_text("\n".join(worse) + "\n")
    cfg = write_config(
        project, [{"name": "bm25", "adapter": "runfile", "params": {"path": str(tmp_path / "worse.trec")}}]
    )
    assert runner.invoke(app, ["run", str(cfg), "--quiet", "--force"]).exit_code == 0
    for _ in range(2):  # a failed gate never becomes the next baseline
        gated = runner.invoke(app, gate)
        assert "baseline: history run 1 " in gated.output, gated.output
        assert gated.exit_code == 1, gated.output  # recall@5 fell by more than 5 points
    assert [e.gates for e in history_read.entries()] == [{"bm25": "pass"}, {"bm25": "fail"}]
    assert (history_read.evaluations(history_read.resolve("history:1"))[0].values == stored).all()
    by_id = runner.invoke(app, [*gate[:-1], "history:2"])
    assert by_id.exit_code == 0, by_id.output  # against itself: no regression


def test_verdicts_are_kept_per_system_so_one_systems_fail_leaves_anothers_pass(project: Path, tmp_path: Path):
    assert runner.invoke(app, ["run", str(write_config(project, [BM25, WEAK])), "--quiet"]).exit_code == 0
    means = {s: m["mrr@10"] for s, m in flat(project / "out").items()}
    assert means["bm25"] > means["weak"]  # the data this test stands on
    floor = tmp_path / "floor.yaml"
    threshold = (means["bm25"] + means["weak"]) / 2
    floor.write_text(yaml.safe_dump({"gates": [{"name": "recall", "metric": "mrr@10", "threshold": threshold}]}))
    gate = ["gate", "--criteria", str(floor), "--candidate", str(project / "out"), "--candidate-system"]
    assert runner.invoke(app, [*gate, "bm25"]).exit_code == 0
    assert runner.invoke(app, [*gate, "weak"]).exit_code == 1
    assert runner.invoke(app, [*gate, "bm25"]).exit_code == 0  # gated again: still its own verdict only
    assert history_read.entries()[0].gates == {"bm25": "pass", "weak": "fail"}
    assert history_read.resolve("history:last-pass").id == 1  # no candidate: the latest run holding a pass
    # a candidate's last-pass comes before it: run 1 holds these very results, so it is no baseline for them
    with pytest.raises(history_read.NoBaseline, match="with system 'weak' passed a gate"):
        history_read.resolve("history:last-pass", candidate=(project / "out", "weak"))


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
    rows = history_read.entries(db)
    assert len(rows) == writers * each
    assert sorted({e.id for e in rows}) == list(range(1, writers * each + 1))
    assert {e.tag for e in rows} == {f"w{i}" for i in range(writers)}
    assert all(sorted(e.scores) == ["bm25", "weak"] and len(e.scores["weak"]) == 2 for e in rows)
    assert all(len(history_read.evaluations(e, db)) == 2 for e in rows[:3])


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


# -- trends join only points of one experiment, dataset and system ------------------------------------------
def test_a_trend_never_joins_other_datasets_or_experiments_and_each_can_be_filtered(project: Path, tmp_path: Path):
    def run(out: str, name: str = "hist", **dataset) -> None:
        cfg = yaml.safe_load(write_config(project, [BM25], out=out).read_text())
        cfg["name"] = name
        cfg["datasets"][0].update(dataset)
        path = project / f"{out}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        assert runner.invoke(app, ["run", str(path), "--quiet"]).exit_code == 0

    run("full")  # run 1: scifact, 12 queries
    run("slice", max_queries=8)  # run 2: an 8-query slice of it under the same experiment name
    run("other", name="tuning")  # run 3: the same data under another experiment
    run("full2")  # run 4: the first series again
    rows = history_read.entries()
    assert [len({e.series(k) for k in e.points}) for e in rows] == [1, 1, 1, 1]
    series = [e.series("bm25") for e in rows]
    assert series[0] == series[3] and len(set(series)) == 3
    assert json.loads(series[1][1])["queries"] == 8 and series[2][0] == "tuning"

    shown = runner.invoke(app, ["history", "--metric", "mrr@10", "--html", str(tmp_path / "trend.html")])
    assert shown.exit_code == 0, shown.output
    page = (tmp_path / "trend.html").read_text()
    assert page.count('class="series"') == 3  # three lines, never one through all four runs
    from retbench.report.history import trend_rows

    header, table = trend_rows(rows, "mrr@10")
    assert len(header) == 5 + 3 and "12q" in " ".join(header) and "8q" in " ".join(header)
    assert [sum(c != "—" for c in r[5:]) for r in table] == [1, 1, 1, 1]  # each run fills one column

    def ids(*args: str) -> list[int]:
        out = runner.invoke(app, ["history", "--json", *args])
        assert out.exit_code == 0, out.output
        return [e["id"] for e in json.loads(out.output)]

    assert ids("--experiment", "tuning") == [3]
    assert ids("--experiment", "hist", "--system", "bm25") == [1, 2, 4]
    fingerprint = json.loads(series[1][1])["corpus_fingerprint"]
    assert ids("--dataset", "scifact/test") == [1, 2, 3, 4]
    assert ids("--dataset", fingerprint[:10]) == [2]  # the slice's corpus sample is its own
    # a filter that matches nothing, or a metric the matching runs never recorded, is no empty table with exit 0
    for args in (["--system", "nosuch"], ["--system", "nosuch", "--json"], ["--experiment", "nope"]):
        none = runner.invoke(app, ["history", *args])
        assert none.exit_code == 2, none.output
        assert f"no run in the history matches {' '.join(args[:2])}; it holds experiments hist, tuning;" in none.output
        assert "systems bm25; datasets scifact/test; metrics mrr@10, recall@5" in none.output
    unscored = runner.invoke(app, ["history", "--metric", "judged@10", "--experiment", "tuning"])
    assert unscored.exit_code == 2
    assert "no runs matching --experiment tuning recorded judged@10; they recorded: mrr@10, recall@5" in unscored.output


def test_a_rerun_that_searched_nothing_adds_no_point_and_a_forced_one_does(project: Path):
    cfg = write_config(project, [BM25, WEAK])
    assert runner.invoke(app, ["run", str(cfg), "--quiet"]).exit_code == 0
    again = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert again.exit_code == 0, again.output
    assert "history: unchanged, nothing searched: bm25 (run 1), weak (run 1)" in again.output
    assert "history: run 2" not in again.output
    assert [e.id for e in history_read.entries()] == [1]
    tagged = runner.invoke(app, ["run", str(cfg), "--quiet", "--tag", "release"])  # a tag asks for an entry
    assert tagged.exit_code == 0 and "history: run 2" in tagged.output
    forced = runner.invoke(app, ["run", str(cfg), "--quiet", "--force"])
    assert forced.exit_code == 0 and "history: run 3" in forced.output
    assert sorted(history_read.entries()[-1].points) == ["bm25", "weak"]


def test_an_old_history_file_is_read_as_it_is_and_migrated_on_the_first_write(project: Path, tmp_path: Path):
    import sqlite3

    cfg = write_config(project, [BM25, WEAK])
    assert runner.invoke(app, ["run", str(cfg), "--quiet", "--no-history"]).exit_code == 0
    hist = tmp_path / "old.sqlite"
    history.register(project / "out", path=hist, tag="a")
    history.register(project / "out", path=hist, tag="b")
    single = project / "single"
    cfg1 = write_config(project, [BM25], out="single")
    assert runner.invoke(app, ["run", str(cfg1), "--quiet", "--no-history"]).exit_code == 0
    history.register(single, path=hist)
    # the first schema: no point columns, one verdict per run
    with sqlite3.connect(hist) as con:
        con.execute("DROP INDEX IF EXISTS systems_point")
        for col in history.POINT_COLUMNS:
            con.execute(f"ALTER TABLE systems DROP COLUMN {col}")
        con.execute("UPDATE runs SET gate = 'pass'")
    con.close()
    before = hist.read_bytes()
    rows = history_read.entries(hist)  # read-only: works on the old schema and writes nothing
    assert hist.read_bytes() == before
    assert [sorted(e.points) for e in rows] == [["bm25", "weak"], ["bm25", "weak"], ["bm25"]]
    # a run-level verdict says whose it was only for a run of one system
    assert [e.gates for e in rows] == [{}, {}, {"bm25": "pass"}]
    assert rows[0].series("bm25") == rows[2].series("bm25")
    shown = runner.invoke(app, ["history", "--history-file", str(hist), "--metric", "mrr@10"])
    assert shown.exit_code == 0, shown.output
    assert hist.read_bytes() == before

    history.record_gate(project / "out", False, system="weak", path=hist)  # the first write migrates
    with sqlite3.connect(hist) as con:
        cols = {r[1] for r in con.execute("PRAGMA table_info(systems)")}
        assert set(history.POINT_COLUMNS) <= cols
    con.close()
    rows = history_read.entries(hist)
    assert [e.gates for e in rows] == [{}, {"weak": "fail"}, {"bm25": "pass"}]
    assert rows[0].points == history_read.entries(hist)[0].points
    assert json.loads(rows[0].series("bm25")[1])["queries"] == 12
