"""The judge's parts that need no model: settings, prompts, verdict parsing, agreement statistics,
label coverage metrics, label sources, synthetic-question diagnostics, and failures as statuses."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from retbench.data.qrels import Qrels
from retbench.data.run import Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.io.judgements import combine_labels
from retbench.llm.client import ChatClient
from retbench.llm.judge import Judge
from retbench.llm.prompts import load_prompt
from retbench.llm.settings import JudgeSettings
from retbench.llm.verdicts import parse_fields, parse_grade
from retbench.studies.labels import agreement as ag
from retbench.studies.labels.relevance import pool, unjudged_pairs
from retbench.studies.labels.synth import find_span, lexical_overlap


def test_judge_settings_name_the_bad_field():
    with pytest.raises(ConfigError, match=r"judge\.temprature"):
        JudgeSettings.from_config({"base_url": "http://127.0.0.1:1", "temprature": 0})
    with pytest.raises(ConfigError, match=r"judge\.retries"):
        JudgeSettings.from_config({"base_url": "http://127.0.0.1:1", "retries": -1})
    with pytest.raises(ConfigError, match=r"judge\.base_url"):
        JudgeSettings.from_config({"model": "m"})


def test_the_api_key_comes_from_the_environment_and_never_reaches_a_manifest(monkeypatch):
    monkeypatch.setenv("RB_TEST_JUDGE_KEY", "sk-secret-value")
    s = JudgeSettings.from_config({"base_url": "http://127.0.0.1:1", "api_key_env": "RB_TEST_JUDGE_KEY"})
    assert s.api_key() == "sk-secret-value"
    assert "sk-secret-value" not in json.dumps(s.to_manifest())
    assert s.to_manifest()["api_key_env"] == "RB_TEST_JUDGE_KEY"
    monkeypatch.delenv("RB_TEST_JUDGE_KEY")
    with pytest.raises(ConfigError, match="RB_TEST_JUDGE_KEY is not set"):
        s.api_key()


def test_prompts_are_versioned_templates_that_fill_their_fields():
    p = load_prompt("relevance_v1")
    assert (p.name, p.version, p.id) == ("relevance", 1, "relevance_v1")
    messages = p.messages(query="what is X?", passage="X is Y.")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "what is X?" in messages[1]["content"] and '{"grade": N}' in messages[1]["content"]
    assert load_prompt("relevance_v2").sha256 != p.sha256
    with pytest.raises(ConfigError, match="relevance_v1"):
        load_prompt("relevance_v9")
    with pytest.raises(ConfigError, match="passage"):
        p.messages(query="only a query")


def test_a_grade_is_a_validated_json_verdict_or_unparseable_never_a_guess():
    assert parse_grade('{"grade": 2}') == (2, "ok")
    assert parse_grade('Sure! ```json\n{"grade": "3"}\n```') == (3, "ok")
    assert parse_grade("1") == (1, "ok")
    assert parse_grade('{"grade": 7}') == (None, "unparseable")
    assert parse_grade('{"grade": 1.5}') == (None, "unparseable")
    assert parse_grade("The passage is relevant, grade 2 or 3") == (None, "unparseable")
    assert parse_grade("") == (None, "unparseable")
    assert parse_fields('{"question": "Why?", "evidence": "Because."}', ("question", "evidence"))[1] == "ok"
    assert parse_fields('{"question": ""}', ("question", "evidence")) == (None, "unparseable")


def test_kappa_accuracy_and_confusion_follow_their_definitions():
    human = [1, 1, 1, 1, 0, 0, 0, 0]
    grades = [3, 2, 1, 3, 0, 0, 2, 1]  # binary at >= 2: 1 1 0 1 0 0 1 0
    out = ag.agreement(human, grades, relevant_from=2, resamples=200)
    assert out["accuracy"]["value"] == pytest.approx(6 / 8)
    # p_o = 0.75; p_e = 0.5*0.5 + 0.5*0.5 = 0.5; kappa = 0.25 / 0.5
    assert out["kappa"]["value"] == pytest.approx(0.5)
    assert out["confusion"] == [[2, 1, 1, 0], [0, 1, 1, 2]]
    assert out["accuracy"]["ci_low"] <= 0.75 <= out["accuracy"]["ci_high"]
    assert ag.kappa(np.array([1, 1]), np.array([1, 1])) is None  # chance agreement is 1: undefined


def test_kendall_tau_and_spot_check_disagreement():
    assert ag.kendall_tau([0.1, 0.2, 0.3], [1, 2, 3]) == pytest.approx(1.0)
    assert ag.kendall_tau([0.1, 0.2, 0.3], [3, 2, 1]) == pytest.approx(-1.0)
    assert ag.kendall_tau([0.5], [1]) is None
    # 0 vs 1: same side, 1 apart -> agree; 1 vs 2: crosses relevant_from -> disagree; 0 vs 3 -> disagree
    assert ag.disagreement([0, 1, 0, 3], [1, 2, 3, 3], relevant_from=2) == pytest.approx(0.5)


def _run() -> Run:
    return Run.from_dict({"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 1.0}}, name="s")


def test_judged_at_k_and_holes_count_any_label_including_zero():
    qrels = Qrels({"q1": {"a": 1, "c": 0}, "q2": {"y": 1}})
    agg = evaluate(_run(), qrels, ["judged@3", "holes@3", "judged@1"]).aggregate(ci=False)
    # q1: a and c labelled of 3 -> 2/3; q2: x unlabelled -> 0
    assert agg["judged@3"]["mean"] == pytest.approx((2 / 3 + 0) / 2)
    assert agg["holes@3"]["mean"] == pytest.approx((1 / 3 + 1) / 2)
    assert agg["judged@1"]["mean"] == pytest.approx(0.5)


def test_human_labels_win_over_llm_labels_and_the_source_is_checked():
    human = Qrels({"q1": {"a": 1}})
    llm = Qrels({"q1": {"a": 0, "b": 3}, "q2": {"x": 2}})
    both = combine_labels("human+llm", human, llm)
    assert dict(both["q1"]) == {"a": 1, "b": 3} and dict(both["q2"]) == {"x": 2}
    assert combine_labels("llm", human, llm) is llm
    assert combine_labels("human", human, None) is human
    with pytest.raises(Exception, match="need LLM qrels"):
        combine_labels("human+llm", human, None)


def test_pooling_takes_each_systems_top_k_and_skips_human_judged_pairs():
    other = Run.from_dict({"q1": {"d": 9.0, "a": 1.0}}, name="t")
    pooled = pool([_run(), other], 2, ["q1"])
    assert pooled == {"q1": ["a", "b", "d"]}
    assert unjudged_pairs(pooled, Qrels({"q1": {"a": 1}})) == [("q1", "b"), ("q1", "d")]


def test_synthetic_question_diagnostics_find_the_span_and_the_overlap():
    doc = "Vitamin C deficiency causes scurvy.\nIt was common  among sailors."
    assert find_span(doc, "common among sailors") == (doc.index("common"), len(doc) - 1)
    assert find_span(doc, "not in the text") is None
    assert lexical_overlap("causes of scurvy", doc) == pytest.approx(1.0)  # both stems are in the doc
    assert lexical_overlap("Which illness did seamen get?", doc) < 0.5


def test_rejected_golden_samples_are_not_evaluated(tmp_path):
    from retbench.io.golden import read_golden

    path = tmp_path / "g.jsonl"
    rows = [
        {"id": "a", "input": "q a", "expected_output": ["d1"], "review": "accept"},
        {"id": "b", "input": "q b", "expected_output": ["d2"], "review": "reject"},
        {"id": "c", "input": "q c", "expected_output": ["d3"], "review": "pending"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [s.id for s in read_golden(path)] == ["a", "c"]


def test_a_refused_connection_is_a_judge_error_with_every_retry_recorded(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = JudgeSettings.from_config({"base_url": f"http://127.0.0.1:{port}", "retries": 2, "backoff": 0.01})
    done = ChatClient(settings).chat([{"role": "user", "content": "hi"}])
    assert done.status == "judge_error" and "Connection" in done.error
    assert [a["attempt"] for a in done.attempts] == [1, 2, 3]
    assert [a["waited_s"] for a in done.attempts] == [0.01, 0.02, 0.0]


def test_a_server_that_never_answers_is_a_judge_timeout():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    try:
        settings = JudgeSettings.from_config(
            {"base_url": f"http://127.0.0.1:{port}", "timeout": 0.3, "retries": 1, "backoff": 0.01}
        )
        done = ChatClient(settings).chat([{"role": "user", "content": "hi"}])
    finally:
        listener.close()
    assert done.status == "judge_timeout" and len(done.attempts) == 2


class _ReplayOpenAI(BaseHTTPRequestHandler):
    """Replays the documented non-streaming OpenAI chat response shape (tinyq4 only streams)."""

    def do_GET(self):  # /v1/models
        self._send({"object": "list", "data": [{"id": "replay-model", "object": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        self._send(
            {
                "id": "x",
                "object": "chat.completion",
                "model": "replay-model",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": '{"grade": 1}'}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 42, "completion_tokens": 5, "total_tokens": 47},
            }
        )

    def _send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_non_streaming_answers_use_the_servers_usage_and_price_it(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ReplayOpenAI)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        settings = JudgeSettings.from_config(
            {
                "base_url": f"http://127.0.0.1:{server.server_port}/v1",
                "seed": 7,
                "price_input_per_1k": 1.0,
                "price_output_per_1k": 2.0,
            }
        )
        judge = Judge(settings, base_url=None, log_path=tmp_path / "calls.jsonl", cache_dir=tmp_path / "cache")
        verdicts = judge.judge([("k", {"query": "q", "passage": "p"})])
    finally:
        server.shutdown()
        server.server_close()
    assert verdicts[0].value == 1 and not verdicts[0].cached
    sent = server.requests[0]
    assert (sent["temperature"], sent["seed"], sent["stream"], sent["model"]) == (0.0, 7, False, "replay-model")
    stats = judge.stats.to_dict(settings)
    assert (stats["input_tokens"], stats["output_tokens"], stats["tokens_estimated"]) == (42, 5, False)
    assert stats["cost"] == pytest.approx(0.042 + 0.010)
    logged = json.loads((tmp_path / "calls.jsonl").read_text())
    assert logged["raw"] == '{"grade": 1}' and logged["verdict"] == 1 and logged["messages"][1]["role"] == "user"


def test_a_calibration_config_names_its_bad_field(tmp_path):
    from retbench.studies.labels.calibrate import load_calibration

    path = tmp_path / "cal.yaml"
    path.write_text("judge: {base_url: 'http://127.0.0.1:1'}\nsample: {relevant: -3}\n")
    with pytest.raises(ConfigError, match=r"sample\.relevant"):
        load_calibration(path)
    path.write_text("judge: {base_url: 'http://127.0.0.1:1'}\nranking: {systems: [{name: a}]}\n")
    with pytest.raises(ConfigError, match=r"ranking\.systems"):
        load_calibration(path)


def test_reviewed_synthetic_samples_keep_their_documents_out_of_the_next_sample(tmp_path):
    from retbench.data.corpus import Corpus
    from retbench.studies.labels.synth import reviewed_documents, sample_documents

    path = tmp_path / "g.jsonl"
    row = {
        "id": "synth-d1",
        "input": "q",
        "expected_output": ["d1"],
        "review": "accept",
        "metadata": {"source_span": {"doc_id": "d1"}},
    }
    pending = {**row, "id": "synth-d2", "review": "pending", "metadata": {"source_span": {"doc_id": "d2"}}}
    path.write_text(json.dumps(row) + "\n" + json.dumps(pending) + "\n")
    reviewed = reviewed_documents(path)
    assert list(reviewed) == ["d1"]
    corpus = Corpus(["d1", "d2", "d3"], ["a", "b", "c"])
    assert sorted(sample_documents(corpus, 5, 0, keep=reviewed)) == ["d2", "d3"]


def test_eval_scores_with_human_llm_or_human_then_llm_labels_and_says_which(tmp_path):
    from typer.testing import CliRunner

    from retbench.cli import app

    (tmp_path / "h.txt").write_text("q1 0 d1 1\n")
    (tmp_path / "l.txt").write_text("q1 0 d2 3\nq1 0 d1 0\n")
    (tmp_path / "r.trec").write_text("q1 Q0 d2 1 2.0 s\nq1 Q0 d1 2 1.0 s\nq1 Q0 d3 3 0.5 s\n")
    seen = {}
    for labels in ("human", "llm", "human+llm"):
        args = ["eval", str(tmp_path / "h.txt"), str(tmp_path / "r.trec"), "--llm-qrels", str(tmp_path / "l.txt")]
        res = CliRunner().invoke(app, [*args, "--labels", labels, "-m", "judged@3", "-m", "P@1", "-f", "json"])
        assert res.exit_code == 0, res.output
        out = json.loads(res.output)
        assert out["labels"] == labels
        seen[labels] = {m: out["metrics"][m]["mean"] for m in ("judged@3", "P@1")}
    assert seen["human"] == {"judged@3": pytest.approx(1 / 3), "P@1": 0.0}  # d2 is a hole: read as not relevant
    assert seen["human+llm"] == {"judged@3": pytest.approx(2 / 3), "P@1": 1.0}  # the LLM fills it; d1 stays human
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "h.txt"), str(tmp_path / "r.trec"), "--labels", "llm"])
    assert res.exit_code == 2 and "--llm-qrels" in res.output


def test_calibration_reports_agreement_ranking_and_reliability_in_metrics_json(tmp_path, monkeypatch):
    """Through a server replaying one fixed answer ({"grade": 1}), so every number is known in advance."""
    from typer.testing import CliRunner

    from retbench.cli import app

    server = ThreadingHTTPServer(("127.0.0.1", 0), _ReplayOpenAI)
    server.requests = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    config = tmp_path / "cal.yaml"
    config.write_text(
        f"dataset: scifact\njudge: {{base_url: 'http://127.0.0.1:{server.server_port}', max_tokens: 8}}\n"
        "sample: {relevant: 4, nonrelevant: 4, nonrelevant_depth: 5}\nspot_check: 3\nbootstrap: 200\n"
        "ranking: {queries: 2, depth: 3, systems: [{name: bm25, adapter: bm25s}, {name: okapi, adapter: rank_bm25}]}\n"
    )
    try:
        res = CliRunner().invoke(app, ["judge-calibrate", str(config), "--output", str(tmp_path / "out")])
    finally:
        server.shutdown()
        server.server_close()
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    # grade 1 is "not relevant" at relevant_from 2: right on the 4 negatives, wrong on the 4 positives
    assert metrics["agreement"]["accuracy"]["value"] == pytest.approx(0.5)
    assert metrics["agreement"]["confusion"] == [[0, 4, 0, 0], [0, 4, 0, 0]]
    assert (
        metrics["judge_reliability"]["spot_check_n"] == 3 and metrics["judge_reliability"]["disagreement_rate"] == 0.0
    )
    assert metrics["judged"] == {"judged": 8, "of": 8}
    assert set(metrics["ranking"]["systems"]) == {"bm25", "okapi"}
    assert "judge_reliability: disagreement 0.0% on spot_check_n 3" in res.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["judge"]["identity"]["model"] == "replay-model"
    assert len((tmp_path / "out" / "judge_calls.jsonl").read_text().splitlines()) == 8 + 3 + metrics["ranking"]["pairs"]
