"""The `generate:` block: answers from a real chat model (`transformers serve` + Qwen2.5-Coder-0.5B on 127.0.0.1).

The 0.5B model's answers are not judged here: the tests check the plumbing (context from the top
chunks, citations and abstention read from the reply, cache, call log, answers saved and scored,
applicable counts in the report), never answer quality. Prompts are kept tiny (one chunk, short
replies): each call costs CPU time in proportion to its tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from retbench.config import validate
from retbench.config.experiment import GenerateBlock
from retbench.errors import ConfigError
from retbench.llm.generate import GeneratingRetriever, Generator, read_answer
from retbench.results import read_results
from retbench.retrievers.base import create
from stored import flat

DOCS = [
    {
        "_id": "fees",
        "title": "",
        "text": "My administration announced we are cutting credit card late fees from $32 to $8.",
    },
    {"_id": "jobs", "title": "", "text": "Fifteen million new jobs in just three years."},
    {"_id": "war", "title": "", "text": "Putin of Russia is on the march, invading Ukraine."},
]
GOLDEN = {
    "samples": [
        {"id": "a1", "input": "How many new jobs in three years?", "expected_output": ["jobs"],
         "metadata": {"answer": ["Fifteen million", "Fifteen million new jobs"]}},
        {"id": "u1", "input": "Which city hosts the next Olympic Games?", "answerable": False},
    ]
}  # fmt: skip


def test_a_reply_gives_citations_as_chunk_ids_and_abstention_from_the_abstain_text():
    ids = ["sotu-001", "sotu-007", "sotu-010"]
    a = read_answer("Fifteen million jobs [2], as [2] and [9] say [1].", ids, "I cannot answer.")
    assert a.references == ("sotu-007", "sotu-001") and a.abstained is False  # [9] is not a context chunk
    assert read_answer("i CANNOT answer!", ids, "I cannot answer.").abstained is True
    assert read_answer("The answer: I cannot answer.", ids, "I cannot answer.").abstained is False


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"llm": {"base_url": "http://127.0.0.1:9"}, "context": 3}, "systems[0].generate.context"),
        ({"llm": {"base_url": "http://127.0.0.1:9"}, "context_k": 0}, "systems[0].generate.context_k"),
        ({"llm": {"base_url": "http://127.0.0.1:9"}, "prompt": "answer_v9"}, "systems[0].generate.prompt"),
        ({"llm": {"model": "x"}}, "systems[0].generate.llm.base_url"),
        ({"llm": {"base_url": "http://127.0.0.1:9"}, "abstain": ""}, "systems[0].generate.abstain"),
    ],
)
def test_a_bad_generate_block_names_its_field_and_the_config(tmp_path, block, field):
    from retbench.studies.benchmark import load_config

    cfg = {
        "name": "g",
        "datasets": [{"name": "rag", "split": "test"}],
        "systems": [{"name": "bm25", "adapter": "bm25s", "generate": block}],
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.field == field and err.value.path == str(path)


@pytest.fixture(scope="module")
def llm_cache(tmp_path_factory):
    """One answer cache for the module: the benchmark test asks what the first test asked (served from it)."""
    return tmp_path_factory.mktemp("llm-cache")


def _llm(url: str, model: Path) -> dict:
    return {"base_url": url, "model_file": str(model), "max_tokens": 12, "timeout": 3000, "retries": 0}


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_generate_answers_from_the_top_chunks_caches_and_logs_every_call(served, llm_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("RETBENCH_CACHE", str(llm_cache))
    url, model = served
    from retbench.data import Corpus, Document, Queries

    corpus = Corpus.from_documents(Document(d["_id"], d["text"]) for d in DOCS)
    spec = validate(GenerateBlock, {"llm": _llm(url, model), "context_k": 1})
    queries = Queries({"a1": "How many new jobs in three years?", "u1": "Which city hosts the next Olympic Games?"})
    log = tmp_path / "generate_calls.jsonl"
    r = GeneratingRetriever(create("bm25s", {}, name="bm25"), Generator(spec, log_path=log))
    try:
        r.index(corpus)
        run = r.search(queries, 3)
        first = dict(r.answers)
        r.answers.clear()
        r.search(queries, 3)
    finally:
        r.close()
    assert set(first) == {"a1", "u1"}
    for qid, a in first.items():
        assert a.error is None and a.text  # the model replied (what it said is not checked)
        assert set(a.latency) == {"retrieval", "generation"}
        assert set(a.references) <= set(run.docs(qid)[:1])  # only the one context chunk can be cited
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["cached"] for c in calls] == [False, False, True, True]
    assert all(c["prompt"] == "answer_v1" and c["status"] == "ok" for c in calls)
    top = run.docs("a1")[0]
    assert f"[1] {corpus[top].text}" in calls[0]["messages"][-1]["content"]  # the top chunk is the context
    assert {q: a.text for q, a in r.answers.items()} == {q: a.text for q, a in first.items()}  # served from the cache
    assert r.describe()["generate"]["prompt"]["id"] == "answer_v1"


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_benchmark_with_generate_saves_answers_and_reports_applicable_counts(
    served, llm_cache, tmp_path, monkeypatch
):
    monkeypatch.setenv("RETBENCH_CACHE", str(llm_cache))
    url, model = served
    data = tmp_path / "tiny_rag"
    data.mkdir()
    (data / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (data / "golden.yaml").write_text(yaml.safe_dump(GOLDEN))
    cfg = {
        "name": "tiny-rag",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["recall@1", "token_f1", "abstention_accuracy", "hallucination_rate"],
        "datasets": [{"name": str(data), "split": "test"}],
        "systems": [
            {
                "name": "bm25",
                "adapter": "bm25s",
                "generate": {
                    "llm": {**_llm(url, model), "price_input_per_1k": 0.5, "price_output_per_1k": 2.0},
                    "context_k": 1,
                },
            }
        ],
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report
    from retbench.studies.benchmark import load_config, run_experiment

    outcome = run_experiment(load_config(path), log=lambda m: None)
    assert not outcome.backend_failed
    sysdir = tmp_path / "out" / "systems" / "bm25"
    answers = [json.loads(line) for line in (sysdir / "answers.jsonl").read_text().splitlines()]
    assert [a["id"] for a in answers] == ["a1", "u1"] and all("answer" in a for a in answers)
    assert len((sysdir / "generate_calls.jsonl").read_text().splitlines()) == 2
    agg = json.loads((sysdir / "aggregates.json").read_text())
    assert agg["abstention_accuracy"]["n"] == 1 and agg["abstention_accuracy"]["of"] == 2
    assert agg["recall@1"] == pytest.approx({"mean": 1.0, "n": 1, "of": 2, "ci_low": 1.0, "ci_high": 1.0})
    assert 0.0 <= agg["token_f1"]["mean"] <= 1.0
    metrics = flat(tmp_path / "out")
    assert metrics["bm25"]["abstention_accuracy"] + metrics["bm25"]["hallucination_rate"] == 1.0
    md = report_markdown(build_report(read_results(tmp_path / "out")))
    assert "(1 of 2)" in md
    # generation tokens and their cost at the configured prices, counted over the calls really made: after
    # the first test both prompts are cache hits (no tokens, no cost); run alone, both are real calls
    calls = [json.loads(line) for line in (sysdir / "generate_calls.jsonl").read_text().splitlines()]
    usage = metrics["bm25"]["usage"]["generate"]
    made = [c for c in calls if not c["cached"]]
    tokens_in, tokens_out = (sum(c[f"{side}_tokens"] for c in made) for side in ("input", "output"))
    assert (usage["calls"], usage["cached"]) == (len(made), len(calls) - len(made))
    assert usage["input_tokens"] == tokens_in and usage["output_tokens"] == tokens_out
    assert all(c["input_tokens"] > 0 for c in made)
    assert usage["cost"] == pytest.approx(tokens_in / 1000 * 0.5 + tokens_out / 1000 * 2.0, abs=1e-6)
    assert set(metrics["bm25"]["latency"]["stages"]) == {"search", "retrieval", "generation"}
    assert "## LLM tokens and cost" in md and "## Latency by stage" in md
