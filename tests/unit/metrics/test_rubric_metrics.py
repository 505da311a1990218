"""Rubric metrics: the prompt carries the rubric (an edit is a new identity), the verdict is the reply's final
JSON object on the rubric's scale or `unparseable`, and a metric applies where the built-in judged ones do."""

from __future__ import annotations

from pathlib import Path

import pytest

from retbench.data.answers import SystemAnswer
from retbench.data.corpus import Sample
from retbench.errors import ConfigError
from retbench.llm.rubric import material, parser, rubric_prompt
from retbench.metrics.rubric import SHIPPED, Rubric

TONE = Rubric("tone", "Is the answer polite?", ("query", "answer"))
DEPTH = Rubric("depth", "How deep is it?", ("query", "answer", "references", "passages"), 3, {0: "shallow"})


def test_an_edited_rubric_is_a_new_prompt_identity_and_the_same_rubric_the_same():
    same = rubric_prompt(Rubric("tone", "Is the answer polite?", ("query", "answer")))
    edited = rubric_prompt(Rubric("tone", "Is the answer polite and brief?", ("query", "answer")))
    steps = rubric_prompt(Rubric("tone", "Is the answer polite?", ("query", "answer"), steps=("Read it.",)))
    assert rubric_prompt(TONE).sha256 == same.sha256
    assert len({same.sha256, edited.sha256, steps.sha256}) == 3
    assert same.id == "rubric_tone_v2"


def test_a_dollar_sign_in_the_rubric_or_the_material_is_text_not_a_placeholder():
    r = Rubric("cost", "Does it give the price in $ (like $8 or ${amount})?", ("query", "answer"))
    [system, user] = rubric_prompt(r).messages(**material(r, query="q ${x}", answer="$8", references=[],
                                                          passages="", negatives=[]))  # fmt: skip
    assert "like $8 or ${amount}" in system["content"]
    assert "q ${x}" in user["content"] and "$8" in user["content"]


def test_the_judge_sees_only_the_inputs_the_rubric_names():
    fields = material(TONE, query="Q", answer="A", references=["R"], passages="[1] P", negatives=["N"])
    assert "Question:\nQ" in fields["material"] and "Answer:\nA" in fields["material"]
    assert "R" not in fields["material"] and "P" not in fields["material"] and "N" not in fields["material"]
    full = Rubric("x", "c", ("query", "answer", "references", "passages", "negatives"))
    text = material(full, query="Q", answer="A", references=["R"], passages="[1] P", negatives=["N"])["material"]
    assert "- R" in text and "[1] P" in text and "Known wrong answers:\n- N" in text


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ('{"verdict": 1}', 1),
        ('{"verdict": false}', 0),
        ('{"verdict": "yes", "reasoning": "fine"}', 1),
        ('It reads politely.\n{"verdict": 1}', 1),
        ('{"verdict": 0}\nIt is rude, as I said.', 0),
        ('Quoted: {"verdict": 1}. My verdict: {"verdict": 0}', 0),
    ],
)
def test_a_yes_no_verdict_is_the_final_objects_flag(reply, value):
    out, status = parser(TONE)(reply)
    assert status == "ok" and out is not None and out["value"] == value


@pytest.mark.parametrize(
    "reply", ['{"verdict": 2}', '{"verdict": 1', "yes", '{"score": 1}', '{"verdict": 1} then {"other": 0}']
)
def test_anything_but_a_flag_in_the_final_object_is_unparseable_on_a_yes_no_scale(reply):
    assert parser(TONE)(reply) == (None, "unparseable")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [('{"score": 3}', (3, "ok")), ('{"score": "2"}', (2, "ok")), ('{"score": 4}', (None, "unparseable")),
     ('{"score": 1.5}', (None, "unparseable")), ('{"score": NaN}', (None, "unparseable"))],
)  # fmt: skip
def test_a_graded_verdict_is_an_integer_on_the_rubrics_scale(reply, expected):
    out, status = parser(DEPTH)(reply)
    assert ((out or {}).get("value"), status) == expected


def test_the_reasoning_is_kept_from_the_object_or_the_prose_before_it():
    assert parser(TONE)('{"reasoning": "kind words", "verdict": 1}')[0] == {"value": 1, "reasoning": "kind words"}
    assert parser(TONE)('Kind words.\n```json\n{"verdict": 1}\n```')[0] == {"value": 1, "reasoning": "Kind words."}


def test_a_rubric_metric_applies_where_the_builtin_judged_metrics_do():
    ok = {"rubric:depth": {"status": "ok", "value": {"value": 2, "reasoning": ""}}}
    with_ref = Sample("q", "Q?", {}, answers=["R"])
    no_ref = Sample("q", "Q?", {})
    given, failed, abstained = SystemAnswer(text="A"), SystemAnswer(error="boom"), SystemAnswer(abstained=True)
    assert DEPTH.outcome(with_ref, given, ok) == 2.0
    assert DEPTH.outcome(no_ref, given, ok) is None  # reads references: none here
    assert DEPTH.outcome(with_ref, failed, ok) == 0.0 and DEPTH.outcome(with_ref, abstained, ok) == 0.0
    assert TONE.outcome(no_ref, abstained, None) is None  # nothing to judge
    assert TONE.outcome(no_ref, given, None) == "not_judged"
    bad = {"rubric:tone": {"status": "unparseable", "value": None}}
    assert TONE.outcome(no_ref, given, bad) == "unparseable"


def test_the_shipped_rubrics_are_registered_metrics_with_their_scales():
    from retbench.metrics.registry import parse_metric, value_range

    for name in ("coherence", "relevance", "helpfulness", "harmlessness", "factual_accuracy", "answer_match"):
        assert parse_metric(name).name == name
    assert value_range("answer_match") == (0.0, 1.0) and value_range("coherence") == (0.0, 5.0)
    assert SHIPPED["answer_match"].inputs == ("query", "answer", "references")
    assert Rubric.from_definition(SHIPPED["coherence"].definition()) == SHIPPED["coherence"]


def _config(tmp_path: Path, rubric: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(
        "datasets: [{name: scifact}]\nsystems: [{adapter: bm25s}]\nmetrics: [recall@5, mine]\n"
        "judge: {base_url: 'http://127.0.0.1:9'}\nrubrics:\n" + rubric
    )
    return path


@pytest.mark.parametrize(
    ("rubric", "where"),
    [
        ("  - name: mine\n    rubric: ok\n    inputs: [query, answers]\n", "cfg.yaml:8: field 'rubrics[0].inputs[1]'"),
        ("  - name: mine\n    rubric: ok\n    scale: 0..11\n", "cfg.yaml:8: field 'rubrics[0].scale'"),
        (
            "  - name: mine\n    rubric: ok\n    scale: bool\n    levels: {2: x}\n",
            "cfg.yaml:9: field 'rubrics[0].levels'",
        ),
        ("  - name: ndcg\n    rubric: ok\n", "cfg.yaml:6: field 'rubrics[0].name'"),
        ("  - name: coherence\n    rubric: mine\n", "cfg.yaml:6: field 'rubrics[0].name'"),
    ],
)
def test_a_bad_rubric_is_one_error_naming_file_line_and_field(tmp_path, rubric, where):
    from retbench.studies.benchmark import load_config

    with pytest.raises(ConfigError) as err:
        load_config(_config(tmp_path, rubric))
    assert where in str(err.value), str(err.value)


def test_a_metric_no_rubric_declares_is_an_unknown_metric(tmp_path):
    from retbench.studies.benchmark import load_config

    with pytest.raises(ConfigError, match="metrics"):
        load_config(_config(tmp_path, "  - name: other\n    rubric: ok\n"))
