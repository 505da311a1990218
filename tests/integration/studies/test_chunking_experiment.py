"""`retbench chunking`: the experiment on a small hand-made chunking set, its results directory and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from retbench.chunkers import make_chunker
from retbench.cli import app
from retbench.errors import ConfigError
from retbench.evaluation import Evaluation
from retbench.studies.chunking import load_config, parse_config, run_chunking
from stored import flat

DOCS = {
    "garden": (
        "# Garden\nNotes on a small garden.\n\n## Tomatoes\nTomatoes need full sun and deep watering twice a week. "
        "Stake them early so the stems do not break.\n\n## Roses\nRoses are pruned in late winter. "
        "Cut above an outward-facing bud.\n"
    ),
    "kitchen": (
        "# Kitchen\n## Bread\nA simple bread needs flour, water, salt and yeast. Knead for ten minutes and let it rise "
        "for an hour.\n\n## Soup\nA tomato soup starts with onions softened in butter.\n"
    ),
}
QUESTIONS = [
    ("q1", "When are roses pruned?", "garden", ["Roses are pruned in late winter."]),
    ("q2", "How long should bread dough be kneaded?", "kitchen", ["Knead for ten minutes"]),
    (
        "q3",
        "What do tomatoes need?",
        "garden",
        ["Tomatoes need full sun and deep watering twice a week.", "Stake them early"],
    ),
]


@pytest.fixture
def small_set(tmp_path: Path) -> Path:
    root = tmp_path / "set"
    (root / "corpora").mkdir(parents=True)
    for name, text in DOCS.items():
        (root / "corpora" / f"{name}.md").write_text(text, encoding="utf-8")
    with open(root / "questions.jsonl", "w", encoding="utf-8") as fh:
        for qid, question, doc, excerpts in QUESTIONS:
            refs = []
            for ex in excerpts:
                start = DOCS[doc].index(ex)
                refs.append({"content": ex, "start_index": start, "end_index": start + len(ex)})
            fh.write(json.dumps({"id": qid, "question": question, "corpus_id": doc, "references": refs}) + "\n")
    return root


def _config(tmp_path: Path, small_set: Path, systems: list[dict], **extra: object) -> Path:
    cfg = {
        "name": "tiny",
        "output": str(tmp_path / "out"),
        "dataset": str(small_set),
        "depth": 5,
        "metrics": ["recall@1", "recall@3", "mrr@3"],
        "token_k": [1],
        "budgets": [40],
        "tokenizer": "all-MiniLM-L6-v2",
        "chunkers": [
            {"name": "headings", "kind": "markdown", "max_size": 60, "unit": "tokens"},
            {"name": "chars", "kind": "fixed_chars", "size": 120, "overlap": 20},
        ],
        "systems": systems,
        **extra,
    }
    path = tmp_path / "chunking.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


BM25 = {"name": "bm25", "adapter": "bm25s", "params": {"stopwords": "en", "stemmer": "english"}}


def test_bm25_pairs_write_a_results_directory_and_the_budget_view(tmp_path, small_set):
    cfg = load_config(_config(tmp_path, small_set, [BM25]))
    outcome = run_chunking(cfg, log=lambda m: None)
    out = tmp_path / "out"
    assert [p.name for p in outcome.systems] == ["headings+bm25", "chars+bm25"]
    metrics = flat(out)
    h = metrics["headings+bm25"]
    # every question's excerpts sit inside one heading section, and BM25 puts that section first
    assert h["recall@1"] == 1.0 and h["mrr@3"] == 1.0
    assert h["chunks"]["n_chunks"] == 5 and h["chunks"]["docs_without_chunks"] == 0
    assert 0 < h["token_precision@1"] < 1 and h["token_recall@1"] == 1.0
    assert "chunks@40tok" in h and "recall@40tok" in h
    ev = Evaluation.from_tsv(out / "systems" / "headings+bm25" / "per_query.tsv")
    assert ev.query_ids == ["q1", "q2", "q3"] and "token_iou@1" in ev.metrics
    assert (out / "systems" / "chars+bm25" / "run.trec").read_text().startswith("q1 Q0 ")
    report = (out / "report.md").read_text()
    assert "## Fixed context budget" in report and "| 40 tokens | headings | bm25 |" in report
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "chunking" and manifest["special_tokens"] == 2
    assert manifest["chunkers"]["chars"]["describe"]["overlap"] == 20
    res = manifest["systems"]["headings+bm25"]["resources"]
    assert res["index_peak_rss_mib"] > 0 and res["search_queries_per_s"] > 0 and res["devices"] == ["cpu"]
    assert "## Resources" in report and "- **headings+bm25**: Resources: peak RSS MiB" in report
    # a re-run skips finished pairs
    logs: list[str] = []
    again = run_chunking(cfg, log=logs.append)
    assert all(p.skipped for p in again.systems) and flat(out) == metrics


def test_dense_pair_reports_encoding_and_encodes_questions_once(tmp_path, small_set):
    dense = {"name": "dense", "adapter": "dense", "params": {"cache_dir": str(tmp_path / "cache"), "batch_size": 16}}
    cfg = load_config(_config(tmp_path, small_set, [dense]))
    run_chunking(cfg, log=lambda m: None)
    metrics = flat(tmp_path / "out")
    first, second = metrics["headings+dense"]["timings"], metrics["chars+dense"]["timings"]
    assert first["chunks_encoded"] == 5 and first["queries_encoded"] == 3
    assert second["queries_encoded"] == 0  # the cache answers the questions for the second chunker
    # only chunk texts the first chunker did not already produce reach the model
    seen = {
        c.text
        for d, t in DOCS.items()
        for c in make_chunker({"kind": "markdown", "max_size": 60, "unit": "tokens"}).chunk(d, t)
    }
    new = {
        c.text
        for d, t in DOCS.items()
        for c in make_chunker({"kind": "fixed_chars", "size": 120, "overlap": 20}).chunk(d, t)
    } - seen
    assert 0 < second["chunks_encoded"] == len(new) < metrics["chars+dense"]["chunks"]["n_chunks"]
    assert metrics["headings+dense"]["recall@3"] == 1.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"colour": 1}, "colour"),
        ({"budgets": [0]}, "budgets[0]"),
        ({"chunkers": [{"kind": "fixed_chars", "size": 10, "overlap": 10}]}, "chunkers[0].overlap"),
        ({"chunkers": [{"kind": "nope"}]}, "chunkers[0].kind"),
        ({"systems": [{"adapter": "no_such_adapter"}]}, "systems[0].adapter"),
        ({"metrics": ["recall@x"]}, "metrics[0]"),
        ({"relevance": {"min_fraction": 2}}, "relevance.min_fraction"),
        ({"chunkers": [{"name": "a+b", "kind": "sentences"}]}, "chunkers[0].name"),
    ],
)
def test_config_errors_name_the_field(change, field):
    raw = {"chunkers": [{"kind": "sentences"}], "systems": [BM25], **change}
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "c.yaml")
    assert info.value.field == field and info.value.path == "c.yaml"


def test_cli_runs_and_exits_2_on_a_bad_config(tmp_path, small_set):
    runner = CliRunner()
    ok = runner.invoke(app, ["chunking", str(_config(tmp_path, small_set, [BM25], depth=3))])
    assert ok.exit_code == 0, ok.output
    assert "Fixed context budget" in ok.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("chunkers: [{kind: fixed_chars, size: -1}]\nsystems: [{adapter: bm25s}]\n")
    res = runner.invoke(app, ["chunking", str(bad)])
    assert res.exit_code == 2 and "chunkers[0].size" in res.output
