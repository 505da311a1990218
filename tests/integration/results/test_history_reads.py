"""Reading the history never writes: not its bytes, not a side file, not a commit another writer left in its log."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from retbench.cli import app
from retbench.results import history, history_read

runner = CliRunner()


def _folder(path: Path) -> dict[str, str]:
    """Every file beside the history, by name, with the sha256 of its bytes."""
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(path.parent.iterdir()) if f.is_file()}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own: SQLite shares a file's state between connections of one process, so
    only another process shows what a read leaves behind (a log and a shared-memory file, before the fix)."""
    return subprocess.run([sys.executable, "-m", "retbench.cli", *args], capture_output=True, text=True, timeout=300)


def _registered(tmp_path: Path, monkeypatch) -> Path:
    hist = tmp_path / "hist" / "history.sqlite"
    monkeypatch.setenv(history.ENV, str(hist))
    cfg = {
        "name": "reads",
        "output": str(tmp_path / "out"),
        "metrics": ["recall@5"],
        "datasets": [{"name": "scifact", "max_queries": 5, "corpus_sample": 100}],
        "systems": [{"name": "bm25", "adapter": "bm25s"}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(cfg))
    assert runner.invoke(app, ["run", str(tmp_path / "exp.yaml"), "--quiet"]).exit_code == 0
    return hist


def test_history_and_a_history_baseline_leave_every_byte_and_file_as_they_were(tmp_path, monkeypatch):
    hist = _registered(tmp_path, monkeypatch)
    before = _folder(hist)
    assert list(before) == ["history.sqlite"]  # the run's writer closed: no log, no shared-memory file
    for args in (["history"], ["history", "--json"]):
        assert _cli(*args, "--history-file", str(hist)).returncode == 0
        assert _folder(hist) == before
    assert len(history_read.evaluations(history_read.resolve("history:last", hist), hist)) == 1
    # a gate whose candidate is not in the history reads its baseline there and records nothing
    shutil.copytree(tmp_path / "out", tmp_path / "copy")
    (tmp_path / "crit.yaml").write_text("gates:\n  - {name: quality, metric: recall@5, threshold: 0.0}\n")
    args = ["gate", "--criteria", str(tmp_path / "crit.yaml"), "--candidate", str(tmp_path / "copy")]
    gated = _cli(*args, "--baseline", "history:last", "--history-file", str(hist))
    assert gated.returncode == 0, gated.stdout + gated.stderr
    assert _folder(hist) == before


def test_a_read_sees_a_commit_waiting_in_the_log_and_never_checkpoints_it(tmp_path, monkeypatch):
    hist = _registered(tmp_path, monkeypatch)
    writer = sqlite3.connect(hist, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("UPDATE runs SET tag = 'waiting-in-the-log' WHERE id = 1")
        wal = Path(f"{hist}-wal")
        main, log = hist.read_bytes(), wal.read_bytes()
        assert log  # the commit is in the log, not in the main file
        shown = _cli("history", "--history-file", str(hist), "--json")
        assert shown.returncode == 0, shown.stderr
        assert "waiting-in-the-log" in json.dumps(json.loads(shown.stdout))
        assert history_read.resolve("history:waiting-in-the-log", hist).id == 1
        assert hist.read_bytes() == main and wal.read_bytes() == log
    finally:
        writer.close()
