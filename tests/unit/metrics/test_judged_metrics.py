"""LLM-judged answer metrics as pure functions of stored verdicts, and the parsing of real judge replies.

The verdicts below are the shapes models really reply with (fenced JSON, prose around it, objects
instead of flags); the end-to-end path through a real model is in test_judged_model.py.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from repo_paths import CONFIGS
from retbench.data.answers import SystemAnswer
from retbench.data.samples import qrels_from_samples
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.io.golden import read_golden
from retbench.io.outputs import read_outputs
from retbench.llm import verdicts as vp
from retbench.metrics import judged as jm
from retbench.studies.judging import PARSERS


def test_context_precision_weights_each_relevant_chunk_by_the_precision_at_its_rank():
    # relevant at ranks 1 and 3: (P@1 * 1 + P@3 * 1) / 2 = (1/1 + 2/3) / 2
    assert jm.context_precision([True, False, True]) == pytest.approx((1 + 2 / 3) / 2)
    # relevant at ranks 2 and 3: (1/2 + 2/3) / 2; the same chunks ranked lower score lower
    assert jm.context_precision([False, True, True]) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert jm.context_precision([True, True, False]) == 1.0
    assert jm.context_precision([False, False, False]) == 0.0  # no relevant chunk


def test_faithfulness_is_supported_claims_over_claims_and_one_with_no_claim():
    assert jm.faithfulness([True, False, True, True]) == 0.75
    assert jm.faithfulness([]) == 1.0
    assert math.isnan(jm.context_recall([]))
    assert jm.context_recall([True, False]) == 0.5
    assert jm.answer_relevance([0.9, 0.7, 0.8]) == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("kind", "reply", "value", "status"),
    [
        ("claims", '```json\n{"statements": ["Late fees fell to $8.", " "]}\n```', ["Late fees fell to $8."], "ok"),
        ("claims", 'Here you go: {"statements": []}', [], "ok"),
        ("claims", '{"statements": "Late fees fell to $8."}', None, "unparseable"),
        ("support", '{"verdicts": [1, 0, true]}', [True, False, True], "ok"),
        ("support", '{"verdicts": [{"statement": "a", "verdict": 1}, {"supported": "no"}]}', [True, False], "ok"),
        ("support", '{"verdicts": [1, "maybe"]}', None, "unparseable"),
        ("context_relevance", '{"relevant": 1}', True, "ok"),
        ("context_relevance", '{"relevant": "yes"}', True, "ok"),
        ("context_relevance", '{"relevant": 2}', None, "unparseable"),
        ("questions", '{"questions": ["What fell to $8?", "How much are late fees now?"]}', None, "ok"),
        ("questions", '{"questions": []}', None, "unparseable"),
        ("abstention", '{"abstained": 0}', False, "ok"),
        ("abstention", "The answer declines.", None, "unparseable"),
    ],
)
def test_each_judge_reply_parses_to_a_validated_value_or_unparseable(kind, reply, value, status):
    got, st = PARSERS[kind](reply)
    assert st == status
    if value is not None or status != "ok":
        assert got == value


def test_scored_verdicts_need_an_integer_score_from_0_to_5_and_their_fields():
    ok = '{"score": 4, "supported_claims": ["Late fees fell to $8 [1]"], "unsupported_claims": []}'
    assert PARSERS["groundedness"](ok) == (
        {"score": 4, "supported_claims": ["Late fees fell to $8 [1]"], "unsupported_claims": []},
        "ok",
    )
    assert PARSERS["groundedness"]('{"score": 5}')[0] == {"score": 5, "supported_claims": [], "unsupported_claims": []}
    assert PARSERS["groundedness"]('{"score": 7, "supported_claims": []}') == (None, "unparseable")
    assert PARSERS["groundedness"]('{"score": 3.5}') == (None, "unparseable")
    assert PARSERS["groundedness"]('{"score": 3, "unsupported_claims": "all"}') == (None, "unparseable")
    assert PARSERS["correctness"]('{"score": "2", "reasoning": "wrong amount"}') == (
        {"score": 2, "reasoning": "wrong amount"},
        "ok",
    )
    assert PARSERS["correctness"]('{"score": 2}') == (None, "unparseable")  # the reasoning is required
    assert vp.parse_flag('{"relevant": true}', "relevant") == (True, "ok")


def _ok(value):
    return {"status": "ok", "value": value, "prompt": "x_v1"}


def _failed(status):
    return {"status": status, "value": None, "prompt": "x_v1"}


ANSWER = SystemAnswer("Late fees were cut from $32 to $8 [1].", ("sotu-20",), False)


def test_a_failed_verdict_is_a_status_never_a_number_and_counts_as_not_judged():
    f = jm.OUTCOMES["faithfulness"]
    assert f(None, ANSWER, {"answer_claims": _ok([])}) == 1.0  # no claim: faithful
    claims = {"context": ["sotu-20"], "answer_claims": _ok(["Late fees were $32.", "Late fees are $8."])}
    assert f(None, ANSWER, {**claims, "answer_support": _ok([True, False])}) == 0.5
    assert f(None, ANSWER, {**claims, "context": []}) == 0.0  # an empty context supports no claim
    assert f(None, ANSWER, {**claims, "answer_support": _failed("unparseable")}) == "unparseable"
    assert f(None, ANSWER, {"answer_claims": _failed("judge_timeout")}) == "judge_timeout"
    assert f(None, ANSWER, None) == "not_judged"
    assert f(None, SystemAnswer("I cannot answer.", abstained=True), None) is None  # nothing to judge
    assert f(None, SystemAnswer(error="judge_error"), None) == 0.0  # no answer produced: 0, as everywhere
    outcomes = [1.0, 0.5, "unparseable", None, "judge_timeout"]
    assert jm.counts(outcomes) == {
        "judged": 2,
        "of": 4,
        "statuses": {"ok": 2, "unparseable": 1, "judge_timeout": 1},
    }


GOLDEN = """\
samples:
  - id: q1
    input: "What were credit card late fees cut to?"
    expected_output: [sotu-20]
    metadata: {answer: "from $32 to $8"}
  - id: q2
    input: "How many new jobs in three years?"
    expected_output: [sotu-30]
    metadata: {answer: "Fifteen million"}
  - id: q3
    input: "Which city hosts the next Olympic Games?"
    answerable: false
"""
OUTPUTS = [
    {"id": "q1", "retrieved": ["sotu-20", "sotu-2", "sotu-30"], "answer": "Late fees were cut from $32 to $8 [1]."},
    {"id": "q2", "retrieved": ["sotu-2", "sotu-30"], "answer": "I cannot answer from the context.", "abstained": True},
    {"id": "q3", "retrieved": ["sotu-2"], "answer": "Paris hosts them."},
]
# what the judging stage stores in systems/<name>/judged.json for these outputs
VERDICTS = {
    "q1": {
        "context": ["sotu-20", "sotu-2", "sotu-30"],
        "answer_claims": _ok(["Late fees were cut from $32 to $8."]),
        "answer_support": _ok([True]),
        "reference_claims": _ok(["Late fees went from $32 to $8."]),
        "reference_support": _ok([True]),
        "chunks": [
            {"doc": "sotu-20", **_ok(True)},
            {"doc": "sotu-2", **_ok(False)},
            {"doc": "sotu-30", **_ok(True)},
        ],
        "groundedness": _ok({"score": 5, "supported_claims": ["cut to $8"], "unsupported_claims": []}),
        "correctness": _ok({"score": 4, "reasoning": "right amount"}),
        "questions": _ok({"questions": ["What were late fees cut to?"], "cosines": [0.9]}),
    },
    "q2": {
        "context": ["sotu-2", "sotu-30"],
        "reference_claims": _ok(["There were fifteen million new jobs."]),
        "reference_support": _failed("judge_timeout"),
        "chunks": [{"doc": "sotu-2", **_ok(False)}, {"doc": "sotu-30", **_failed("unparseable")}],
    },
    "q3": {"context": ["sotu-2"], "abstention": _ok(True)},
}
METRICS = [
    "faithfulness",
    "context_precision",
    "context_recall",
    "answer_relevance",
    "groundedness",
    "correctness",
    "abstention_accuracy",
]


def test_judged_metrics_read_stored_verdicts_through_evaluate_with_nan_where_they_do_not_apply(tmp_path):
    (tmp_path / "golden.yaml").write_text(GOLDEN)
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(o) + "\n" for o in OUTPUTS))
    samples, out = read_golden(tmp_path / "golden.yaml"), read_outputs(tmp_path / "out.jsonl")
    ev = evaluate(out.run, qrels_from_samples(samples), METRICS, samples=samples, answers=out.answers, judged=VERDICTS)
    table = {m: ev.column(m).tolist() for m in METRICS}
    by_id = {s.id: s for s in samples}
    nan = None
    got = {m: [None if math.isnan(v) else round(v, 4) for v in vals] for m, vals in table.items()}
    assert got == {
        "faithfulness": [1.0, nan, nan],  # q2 abstained, q3's answer was not asked about
        "context_precision": [round((1 + 2 / 3) / 2, 4), nan, nan],  # q2: a chunk verdict failed
        "context_recall": [1.0, nan, nan],  # q2's support verdict timed out
        "answer_relevance": [0.9, nan, nan],
        "groundedness": [5.0, nan, nan],
        "correctness": [4.0, 0.0, nan],  # q2 abstained on an answerable question: not a correct answer
        "abstention_accuracy": [nan, nan, 1.0],  # the output did not say; the judge classified it
    }
    assert jm.counts(
        jm.outcomes("context_precision", [by_id[q] for q in ev.query_ids], out.answers, VERDICTS, ev.query_ids)
    ) == {
        "judged": 1,
        "of": 2,
        "statuses": {"ok": 1, "unparseable": 1},
    }
    agg = ev.aggregate(ci=False)
    estimate = agg["groundedness"].pop("estimate")  # LLM-made, no human labels to correct it
    assert agg["groundedness"] == {"mean": 5.0, "n": 1, "of": 3}
    assert (estimate["source"], estimate["n_human"], estimate["n_llm"], estimate["mean"]) == ("llm", 0, 1, 5.0)
    without = evaluate(
        out.run, qrels_from_samples(samples), ["abstention_accuracy"], samples=samples, answers=out.answers
    )
    assert np.isnan(without.column("abstention_accuracy")[0]) and without.column("abstention_accuracy")[2] == 0.0


def _config(tmp_path, **extra):
    cfg = {
        "name": "j",
        "datasets": [{"name": "rag", "split": "test"}],
        "systems": [{"name": "bm25", "adapter": "bm25s"}],
        **extra,
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"metrics": ["recall@5", "groundedness"]}, "metrics[1]"),
        ({"metrics": ["faithfulness"], "judge": {"base_url": "http://127.0.0.1:9"}, "judging": {"k": 3}}, "judging.k"),
        (
            {
                "metrics": ["faithfulness"],
                "judge": {"base_url": "http://127.0.0.1:9"},
                "judging": {"prompts": {"claims": "claims_v9"}},
            },
            "judging.prompts.claims",
        ),
        ({"metrics": ["faithfulness"], "judge": {"model": "m"}}, "judge.base_url"),
    ],
)
def test_a_judged_metric_needs_a_valid_judge_block_and_the_error_names_the_field(tmp_path, extra, field):
    from retbench.studies.benchmark import load_config

    path = _config(tmp_path, **extra)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.field == field and err.value.path == str(path)


def test_the_judge_block_is_part_of_a_cells_hash_only_when_a_judged_metric_is_asked(tmp_path):
    from retbench.studies.benchmark import load_config, system_hash

    judge = {"base_url": "http://127.0.0.1:9"}
    plain = load_config(_config(tmp_path, metrics=["recall@5"]))
    with_judge = load_config(_config(tmp_path, metrics=["recall@5"], judge=judge))
    judged = load_config(_config(tmp_path, metrics=["recall@5", "groundedness"], judge=judge))
    other = load_config(_config(tmp_path, metrics=["recall@5", "groundedness"], judge={**judge, "max_tokens": 9}))
    h = [system_hash(c, c.systems[0], c.dataset_specs[0]) for c in (plain, with_judge, judged, other)]
    assert h[0] == h[1] and len({h[1], h[2], h[3]}) == 3


def test_the_impact_studys_context_recall_takes_an_llm_judge_and_its_report_names_it():
    from retbench.report.impact import _context_recall_judge
    from retbench.studies.impact.config import load_ingest_config, parse_ingest_config

    cfg_path = CONFIGS / "ingest.yaml"
    raw = yaml.safe_load(cfg_path.read_text(encoding="utf-8"))
    raw["context_recall"]["judge"] = {"base_url": "http://127.0.0.1:9", "max_tokens": 32}
    cfg = parse_ingest_config(raw, str(cfg_path))
    assert cfg.context_recall is not None and cfg.context_recall.judge is not None
    assert cfg.context_recall.judge.max_tokens == 32
    raw["context_recall"]["judge"] = {"model": "m"}
    with pytest.raises(ConfigError) as err:
        parse_ingest_config(raw, str(cfg_path))
    assert err.value.field == "context_recall.judge.base_url"
    assert getattr(load_ingest_config(cfg_path).context_recall, "judge", "no block") is None  # cosine by default
    judged = {"judge": "llm", "model": "qwen", "prompt": "support_v1", "statuses": {"ok": 3, "unparseable": 1}}
    line = " ".join(_context_recall_judge({**judged, "context_k": 5}))
    assert "LLM judge qwen with prompt support_v1" in line and "judged 3 of 4" in line and "1 unparseable" in line
    assert "cosine ≥ 0.80" in " ".join(_context_recall_judge({"judge": "cosine", "threshold": 0.8, "context_k": 5}))


def test_a_benchmark_asks_the_judge_nothing_where_no_judged_metric_applies(tmp_path):
    from retbench.studies.benchmark import load_config, run_experiment

    data = tmp_path / "tiny_rag"
    data.mkdir()
    docs = [
        {"_id": "fees", "text": "We are cutting credit card late fees from $32 to $8."},
        {"_id": "jobs", "text": "Jobs."},
    ]
    (data / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    golden = {"samples": [{"id": "a1", "input": "What were late fees cut to?", "expected_output": ["fees"]}]}
    (data / "golden.yaml").write_text(yaml.safe_dump(golden))
    path = _config(
        tmp_path,
        output=str(tmp_path / "out"),
        depth=10,
        metrics=["recall@1", "groundedness", "faithfulness"],
        datasets=[{"name": str(data), "split": "test"}],
        judge={"base_url": "http://127.0.0.1:9"},  # never called: the system gives no answer to judge
    )
    summary = run_experiment(load_config(path), log=lambda m: None).result["bm25"]
    assert summary.value("recall@1") == 1.0 and summary.judge is not None and summary.judge["calls"] == 0
    assert summary.judge["metrics"]["groundedness"] == {"judged": 0, "of": 0, "statuses": {}}
    stored = json.loads((tmp_path / "out" / "systems" / "bm25" / "judged.json").read_text())
    assert stored["verdicts"] == {"a1": {"context": ["fees"]}}  # BM25's only match: the judged context
