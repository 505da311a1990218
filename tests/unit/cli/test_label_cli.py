"""`retbench label init / next / status` and `retbench compare --labels` in process (no judge: pairs carry
verdicts written by hand, the way `label prelabel` stores them)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from retbench.cli import app
from retbench.studies.labels.study import read_study

runner = CliRunner()


def _traces_folder(tmp_path: Path) -> Path:
    """A trace import's folder: corpus, queries, the live run under runs/, no qrels."""
    data = tmp_path / "traces"
    (data / "runs").mkdir(parents=True)
    docs = {f"d{i}": f"text {i}" for i in range(6)}
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs.items())
    )
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(5))
    )
    (data / "runs" / "live.trec").write_text(
        "".join(f"q{i} Q0 d{(i + j) % 6} {j + 1} {9 - j} live\n" for i in range(5) for j in range(3))
    )
    (tmp_path / "bm25.trec").write_text(
        "".join(f"q{i} Q0 d{(2 * i + j) % 6} {j + 1} {9 - j} bm25\n" for i in range(5) for j in range(3))
    )
    return data


def test_init_takes_the_import_s_live_run_and_further_runs_and_status_answers_from_llm_labels(tmp_path):
    data = _traces_folder(tmp_path)
    study = tmp_path / "study"
    res = runner.invoke(
        app,
        [
            "label",
            "init",
            str(study),
            "--dataset",
            str(data),
            "--runs",
            str(tmp_path / "bm25.trec"),
            "--k",
            "3",
            "--decision",
            "live,bm25",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "2 systems (live, bm25), 5 queries" in res.output
    made = read_study(study)
    for p in made.pairs:
        p["llm"] = {"grade": int(p["doc_id"][1:]) % 2, "status": "ok", "probs": {"0": 0.5, "1": 0.5}}
    made.save_pairs()
    res = runner.invoke(app, ["label", "status", str(study)])
    assert res.exit_code == 0, res.output
    assert "judge bias uncorrected" in res.output and "live: nDCG@3" in res.output
    res = runner.invoke(app, ["label", "next", str(study), "--budget", "4"])
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.output.splitlines()[1:] if line[:1].isdigit() and "\t" in line]
    assert [int(r[3]) for r in rows] == [0, 1, 2, 3]  # queue order
    assert "expected after these 4 pairs" in res.output
    res = runner.invoke(app, ["compare", "--labels", str(study)])
    assert res.exit_code == 0, res.output
    assert "bm25 − live" in res.output or "beats" in res.output


def test_a_decision_that_is_not_two_systems_is_a_usage_error(tmp_path):
    data = _traces_folder(tmp_path)
    res = runner.invoke(app, ["label", "init", str(tmp_path / "s"), "--dataset", str(data), "--decision", "live"])
    assert res.exit_code == 2 and "--decision takes two systems" in res.output
