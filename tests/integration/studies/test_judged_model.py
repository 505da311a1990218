"""The judging stage against a real judge (`transformers serve` + Qwen2.5-Coder-0.5B on 127.0.0.1), end to end.

The 0.5B model's verdicts are not checked for quality: the test checks that each asked verdict is
stored with the judge's identity (a validated value, or a recorded status), that the report says
"judged N of M", and that a re-run makes no call. Calls are few and short (one question, one context
chunk, tiny prompt variants, few output tokens): each call costs CPU time in proportion to its tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from repo_paths import PROMPTS
from retbench.llm.verdicts import STATUSES
from retbench.results import read_results
from stored import flat_system

DOCS = [
    {"_id": "fees", "title": "", "text": "We are cutting credit card late fees from $32 to $8."},
    {"_id": "jobs", "title": "", "text": "Fifteen million new jobs in just three years."},
]
GOLDEN = {
    "samples": [
        {"id": "a1", "input": "What were late fees cut to?", "expected_output": ["fees"],
         "metadata": {"answer": "$8"}},
    ]
}  # fmt: skip


def _run(path: Path, force: bool) -> dict:
    from retbench.studies.benchmark import load_config, run_experiment

    outcome = run_experiment(load_config(path), force=force, log=lambda m: None)
    assert not outcome.backend_failed
    return flat_system(outcome.result["bm25"])


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_benchmark_with_a_judge_stores_each_verdict_and_a_rerun_makes_no_call(served, tmp_path, monkeypatch):
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    url, model = served
    data = tmp_path / "tiny_rag"
    data.mkdir()
    (data / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (data / "golden.yaml").write_text(yaml.safe_dump(GOLDEN))
    llm = {"base_url": url, "model_file": str(model), "timeout": 3000, "retries": 0}
    cfg = {
        "name": "tiny-judged",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["recall@1", "groundedness", "context_precision"],
        "datasets": [{"name": str(data), "split": "test"}],
        "systems": [
            {"name": "bm25", "adapter": "bm25s", "generate": {"llm": {**llm, "max_tokens": 12}, "context_k": 1}}
        ],
        "judge": {**llm, "max_tokens": 10},
        "judging": {
            "context_k": 1,
            "max_chars": 200,
            "prompts": {
                "groundedness": str(PROMPTS / "tiny_groundedness_v1.txt"),
                "context_relevance": str(PROMPTS / "tiny_context_relevance_v1.txt"),
            },
        },
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    first = _run(path, force=False)

    sysdir = tmp_path / "out" / "systems" / "bm25"
    stored = json.loads((sysdir / "judged.json").read_text())
    rec = stored["verdicts"]["a1"]
    assert rec["context"] == ["fees"]  # the top chunk is the judged context
    asked = [*rec["chunks"], *([rec["groundedness"]] if "groundedness" in rec else [])]
    assert rec["chunks"][0]["doc"] == "fees" and rec["chunks"][0]["prompt"] == "tiny_context_relevance_v1"
    for v in asked:  # a validated value, or a status and no value
        assert v["status"] in STATUSES
        assert (v["value"] is not None) == (v["status"] == "ok")
    if rec.get("groundedness", {}).get("status") == "ok":
        assert 0 <= rec["groundedness"]["value"]["score"] <= 5
    assert set(stored["identity"]) >= {"context_relevance"}
    assert stored["identity"]["context_relevance"]["model_sha256"]
    calls = [json.loads(line) for line in (sysdir / "judge_calls.jsonl").read_text().splitlines()]
    assert len(calls) == len(asked) and not any(c["cached"] for c in calls)

    judge = first["judge"]
    assert judge["calls"] == len(asked) and judge["cached"] == 0 and judge["input_tokens"] > 0
    counts = judge["metrics"]["context_precision"]
    assert counts["of"] == 1 and counts["judged"] == (rec["chunks"][0]["status"] == "ok")
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report

    md = report_markdown(build_report(read_results(tmp_path / "out")))
    assert f"(judged {counts['judged']} of 1)" in md
    # a judged metric says which labels it comes from: the judge's, bias uncorrected (no human tier)
    estimate = json.loads((sysdir / "aggregates.json").read_text())["context_precision"]["estimate"]
    assert (estimate["source"], estimate["n_human"], estimate["n_llm"]) == ("llm", 0, counts["judged"])
    assert f"(judged {counts['judged']} of 1) (LLM labels, judge bias uncorrected)" in md

    again = _run(path, force=True)  # answers and verdicts come from the caches: no new call
    assert again["judge"]["calls"] == 0 and again["judge"]["cached"] == len(asked)
    assert again["judge"]["metrics"] == judge["metrics"]
    assert json.loads((sysdir / "judged.json").read_text())["verdicts"] == stored["verdicts"]
