"""Citations against gold supports: recency-conflict rules, and cited chunks mapped to their documents.

The chunk tests chunk the shipped chunking set (`corpora/chunking_eval`: four real documents, one with
wikitext headings) with retbench's own chunkers, so chunk ids, documents and heading paths are real.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from retbench.chunkers import make_chunker
from retbench.data import Run
from retbench.data.answers import SystemAnswer
from retbench.data.samples import qrels_from_samples
from retbench.errors import InputError
from retbench.evaluation import evaluate
from retbench.io.chunking_eval import read_chunking_eval
from retbench.io.datasets import resolve
from retbench.io.golden import read_golden
from retbench.io.outputs import read_outputs

NOTES = """\
samples:
  - id: newer
    input: "How many days of remote work are allowed per week?"
    expected_output: [policy-2023, policy-2025]      # the conflicting notes, oldest first
    recency_conflict_rule: cite_newer
  - id: both
    input: "Which laptops are supported?"
    expected_output: {laptops-2022: 1, laptops-2024: 1}
    metadata: {recency_conflict_rule: cite_both}
  - id: ack
    input: "Who approves travel?"
    expected_output: [travel-old, travel-new]
    metadata: {recency_conflict_rule: acknowledge_both, answer: "the team lead"}
  - id: plain
    input: "Where is the office?"
    expected_output: [office]
"""


def _outputs(tmp_path: Path, cites: dict[str, list[str]]) -> Path:
    out = tmp_path / "outputs.jsonl"
    out.write_text(
        "".join(json.dumps({"id": q, "retrieved": c, "answer": "x", "references": c}) + "\n" for q, c in cites.items())
    )
    return out


@pytest.mark.parametrize(
    ("cites", "expected"),
    [
        (
            {"newer": ["policy-2025"], "both": ["laptops-2024", "laptops-2022"], "ack": ["travel-new", "travel-old"]},
            [1, 1, 1],
        ),
        ({"newer": ["policy-2023", "policy-2025"], "both": ["laptops-2024"], "ack": ["travel-new"]}, [0, 0, 0]),
        ({"newer": ["policy-2023"], "both": [], "ack": ["travel-old", "travel-new", "office"]}, [0, 0, 1]),
    ],
)
def test_recency_conflict_checks_the_rule_of_each_conflicting_sample_and_nothing_else(tmp_path, cites, expected):
    gold = tmp_path / "golden.yaml"
    gold.write_text(NOTES)
    samples = read_golden(gold)
    assert [s.recency_conflict_rule for s in samples] == ["cite_newer", "cite_both", "acknowledge_both", None]
    out = read_outputs(_outputs(tmp_path, {**cites, "plain": ["office"]}))
    ev = evaluate(out.run, qrels_from_samples(samples), ["recency_conflict"], samples=samples, answers=out.answers)
    col = ev.column("recency_conflict").tolist()
    assert col[:3] == expected and math.isnan(col[3])  # a sample without a rule is not counted
    assert ev.aggregate(ci=False)["recency_conflict"] == {"mean": sum(expected) / 3, "n": 3, "of": 4}


def test_recency_conflict_scores_zero_without_an_answer_or_with_a_failed_one(tmp_path):
    gold = tmp_path / "golden.yaml"
    gold.write_text(NOTES)
    samples = read_golden(gold)
    run = Run.from_dict({s.id: {"policy-2025": 1.0} for s in samples})
    answers = {"newer": SystemAnswer(error="judge_timeout", references=("policy-2025",))}
    ev = evaluate(run, qrels_from_samples(samples), ["recency_conflict"], samples=samples, answers=answers)
    assert ev.column("recency_conflict").tolist()[:3] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("sample", "needle"),
    [
        ("{id: q1, input: x, expected_output: [a, b], recency_conflict_rule: newest}", "must be one of cite_newer"),
        ("{id: q1, input: x, expected_output: [a], metadata: {recency_conflict_rule: cite_both}}", "two or more"),
        ("{id: q1, input: x, answerable: false, recency_conflict_rule: cite_newer}", "answerable sample"),
    ],
)
def test_a_bad_recency_conflict_rule_names_file_line_and_field(tmp_path, sample, needle):
    gold = tmp_path / "g.yaml"
    gold.write_text("- {id: q0, input: y, expected_output: [c]}\n- " + sample + "\n")
    with pytest.raises(InputError, match=needle) as err:
        read_golden(gold)
    assert err.value.line == 2 and err.value.field.endswith("recency_conflict_rule")
    assert f"{gold}:2" in str(err.value)


# -- cited chunks and their documents ---------------------------------------------------------------
@pytest.fixture(scope="module")
def chunked():
    ce = read_chunking_eval(resolve("chunking_eval"))
    chunks = make_chunker({"kind": "markdown", "max_size": 800}).chunk_corpus(ce.corpus)
    return ce, chunks


def _section(chunks, doc: str, path: str) -> list[str]:
    return [c.id for c in chunks.chunks if c.doc_id == doc and c.heading_path == path]


def _attribution(qrels, cites: list[str], texts) -> float:
    run = Run.from_dict({"q": {c: 1.0 for c in cites}})
    ev = evaluate(run, {"q": qrels}, ["attribution"], answers={"q": SystemAnswer("x", tuple(cites))}, texts=texts)
    return float(ev.column("attribution")[0])


def test_a_cited_chunk_counts_for_its_document_when_gold_supports_are_documents(chunked):
    ce, chunks = chunked
    corpus = chunks.to_corpus()
    sotu = [c.id for c in chunks.chunks if c.doc_id == "state_of_the_union"]
    pubmed = [c.id for c in chunks.chunks if c.doc_id == "pubmed"]
    gold = dict(ce.to_dataset().split("test")["q2"])  # document-level judgement: {"state_of_the_union": 1}
    assert gold == {"state_of_the_union": 1} and len(sotu) > 10
    assert _attribution(gold, [sotu[7]], corpus) == 1.0
    assert _attribution(gold, [sotu[7]], chunks) == 1.0  # a ChunkSet maps the same way
    assert _attribution(gold, [pubmed[0]], corpus) == 0.0  # a chunk of another document
    assert _attribution(gold, [sotu[7]], None) == 0.0  # without the corpus a chunk id is just an id


def test_a_cited_chunk_counts_for_the_heading_anchors_it_lies_under(chunked):
    _, chunks = chunked
    corpus = chunks.to_corpus()
    gameplay = _section(chunks, "wikitexts", "Valkyria Chronicles III > Gameplay")
    plot = _section(chunks, "wikitexts", "Valkyria Chronicles III > Plot")
    assert gameplay and plot
    anchor = {"wikitexts > Valkyria Chronicles III > Gameplay": 1}
    assert _attribution(anchor, [gameplay[0]], corpus) == 1.0
    assert _attribution({"wikitexts > Valkyria Chronicles III": 1}, [plot[0]], corpus) == 1.0
    assert _attribution(anchor, [plot[0]], corpus) == 0.0  # same document, another section


def test_citing_a_document_or_a_sibling_chunk_does_not_credit_a_gold_chunk(chunked):
    _, chunks = chunked
    corpus = chunks.to_corpus()
    sotu = [c.id for c in chunks.chunks if c.doc_id == "state_of_the_union"]
    gold = {sotu[3]: 1}
    assert _attribution(gold, [sotu[3]], corpus) == 1.0
    assert _attribution(gold, ["state_of_the_union"], corpus) == 0.0
    assert _attribution(gold, [sotu[4]], corpus) == 0.0


def test_a_chunked_corpus_file_maps_chunks_through_its_metadata(tmp_path, chunked):
    _, chunks = chunked
    from retbench.io.beir import read_corpus

    lines = [
        {"_id": c.id, "text": c.text, "metadata": {"doc_id": c.doc_id, "heading_path": c.heading_path}}
        for c in chunks.chunks[:400]
    ]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    corpus = read_corpus(path)
    first = chunks.chunks[0]
    assert _attribution({first.doc_id: 1}, [first.id], corpus) == 1.0
