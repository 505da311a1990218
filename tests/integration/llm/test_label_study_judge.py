"""`retbench label init` + `label prelabel` against a real judge (`transformers serve` serving Qwen2.5-Coder-0.5B on 127.0.0.1).

The 0.5B model is near chance at relevance: these tests check the plumbing (every pooled pair gets a verdict or
a failure status, the call log and cache, the judge's identity in study.json, a rerun makes no calls), never
the quality of its grades. Three pairs keep the CPU cost small.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repo_paths import PROMPTS
from retbench.cli import app
from retbench.llm.verdicts import STATUSES

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
runner = CliRunner()


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_prelabel_grades_every_pooled_pair_once_and_a_rerun_makes_no_calls(served, tmp_path, monkeypatch):
    url, model = served
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "traces"  # a trace import's folder: no qrels, the live run under runs/
    docs = {
        "d1": "Scurvy is caused by a lack of vitamin C.",
        "d2": "Paris is the capital of France.",
        "d3": "Sailors ate citrus.",
    }
    _write(
        data / "corpus.jsonl", "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs.items())
    )
    _write(data / "queries.jsonl", json.dumps({"_id": "q1", "text": "what causes scurvy"}) + "\n")
    _write(data / "runs" / "live.trec", "q1 Q0 d1 1 2.0 live\nq1 Q0 d2 2 1.0 live\n")
    other = _write(tmp_path / "bm25.trec", "q1 Q0 d3 1 2.0 bm25\nq1 Q0 d1 2 1.0 bm25\n")
    judge_yaml = _write(
        tmp_path / "judge.yaml",
        f"judge: {{base_url: '{url}', model_file: '{model}', max_tokens: 8, prompt: '{PROMPTS / 'tiny_relevance_v1.txt'}', "
        "timeout: 3000, retries: 0}\n",
    )
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
            str(other),
            "--k",
            "2",
            "--decision",
            "live,bm25",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "2 systems (live, bm25), 1 queries, 3 pooled pairs" in res.output

    res = runner.invoke(app, ["label", "prelabel", str(study), "--judge", str(judge_yaml)])
    assert res.exit_code in (0, 3), res.output  # 3: a call failed, which the pair records as its status
    assert "judge plan: 3 verdicts, 0 cached, 3 calls to make" in res.output
    pairs = [json.loads(line) for line in (study / "pairs.jsonl").read_text().splitlines()]
    assert [(p["qid"], p["doc_id"]) for p in pairs] == [("q1", "d1"), ("q1", "d2"), ("q1", "d3")]
    for p in pairs:
        assert p["llm"]["status"] in STATUSES
        assert (p["llm"]["grade"] is None) == (p["llm"]["status"] != "ok")
    calls = [json.loads(line) for line in (study / "judge_calls.jsonl").read_text().splitlines()]
    assert sorted(tuple(c["key"]) for c in calls) == [("q1", "d1"), ("q1", "d2"), ("q1", "d3")]
    meta = json.loads((study / "study.json").read_text())
    assert meta["judge"]["identity"]["prompt"]["id"] == "tiny_relevance_v1"

    again = runner.invoke(app, ["label", "prelabel", str(study), "--judge", str(judge_yaml)])
    ok = sum(p["llm"]["status"] == "ok" for p in pairs)
    assert f"judge plan: {3 - ok} verdicts, " in again.output  # pairs with an ok verdict are not asked again
    status = runner.invoke(app, ["label", "status", str(study)])
    assert status.exit_code == 0, status.output
    assert "graded by people: 0" in status.output
