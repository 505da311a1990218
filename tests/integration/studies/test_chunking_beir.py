"""`retbench chunking` on a BEIR corpus: a chunk inherits its document's grade, a document ranks at its best
chunk, the system searches deeper until it has `depth` documents, and a short ranking is counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from retbench.chunkers import make_chunker
from retbench.cli import app
from retbench.config import DatasetSpec
from retbench.errors import ConfigError
from retbench.retrievers.base import create
from retbench.studies.benchmark import load_config as load_experiment
from retbench.studies.benchmark import run_experiment
from retbench.studies.chunk_documents import joined_corpus
from retbench.studies.chunking import parse_config, run_chunking
from retbench.studies.dataset import prepare_dataset
from stored import flat_system

BM25 = {"name": "bm25", "adapter": "bm25s", "params": {"stopwords": "en", "stemmer": "english"}}
METRICS = ["ndcg@10", "recall@10", "recall@30", "map", "mrr@10", "P@5"]
SLICE = {"name": "scifact", "split": "test", "max_queries": 15, "corpus_sample": 300}


def chunking_config(tmp_path: Path, chunkers: list[dict[str, Any]], dataset: dict[str, Any] = SLICE, **extra: Any):
    raw = {
        "name": "beir",
        "output": str(tmp_path / "chunking"),
        "dataset": dataset,
        "depth": 30,
        "metrics": METRICS,
        "chunkers": chunkers,
        "systems": [BM25],
        **extra,
    }
    return parse_config(raw, str(tmp_path / "chunking.yaml"))


def outcome_of(outcome: Any, name: str) -> Any:
    return next(o for o in outcome.systems if o.name == name)


def test_whole_documents_as_chunks_score_exactly_what_retbench_run_scores_on_the_same_slice(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        yaml.safe_dump(
            {"name": "run", "output": str(tmp_path / "run"), "depth": 30, "metrics": METRICS, "datasets": [SLICE]}
            | {"systems": [BM25]}
        )
    )
    ran = run_experiment(load_experiment(exp), log=lambda _: None, history=False)
    cfg = chunking_config(tmp_path, [{"name": "document", "kind": "document"}])
    chunked = run_chunking(cfg, log=lambda _: None)

    want = outcome_of(ran, "bm25").result
    got = outcome_of(chunked, "document+bm25").result
    assert got.run.docs(got.run.query_ids[0]) and "#" not in got.run.docs(got.run.query_ids[0])[0]  # documents
    assert got.evaluation.query_ids == want.evaluation.query_ids and len(want.evaluation.query_ids) == 15
    assert got.evaluation.metrics == want.evaluation.metrics
    np.testing.assert_allclose(got.evaluation.values, want.evaluation.values, rtol=0, atol=1e-9)
    for m in METRICS:
        assert flat_system(chunked.result["document+bm25"])[m] == pytest.approx(
            flat_system(ran.result["bm25"])[m], abs=1e-9
        )
    assert (
        flat_system(chunked.result["document+bm25"])["coverage"]["short"]
        == flat_system(ran.result["bm25"])["coverage"]["short"]
    )
    assert (tmp_path / "chunking" / "report.md").is_file() and (tmp_path / "chunking" / "report.html").is_file()


def test_small_chunks_search_deeper_until_every_query_has_depth_documents_or_the_system_has_no_more(
    tmp_path: Path,
) -> None:
    chunker = {"name": "chars_150", "kind": "fixed_chars", "size": 150}
    cfg = chunking_config(tmp_path, [chunker])
    out = run_chunking(cfg, log=lambda _: None)
    run = outcome_of(out, "chars_150+bm25").result.run
    summary = flat_system(out.result["chars_150+bm25"])
    assert summary["deeper"]["queries"] > 0  # the first 30 chunks held fewer than 30 documents somewhere

    # what the same system gives when asked for every chunk at once: the documents there are to find
    ds, queries = prepare_dataset(DatasetSpec("scifact", "test", 15, 300))
    chunks = make_chunker(chunker).chunk_corpus(joined_corpus(ds.corpus))
    bm25 = create("bm25s", BM25["params"], name="bm25")
    bm25.index(chunks.to_corpus())
    everything = bm25.search(queries, len(chunks))
    for q in queries:
        available = len(dict.fromkeys(chunks[c].doc_id for c in everything.docs(q)))
        assert len(run.docs(q)) == min(30, available)
        assert len(set(run.docs(q))) == len(run.docs(q))
    assert summary["coverage"]["short"] == sum(len(run.docs(q)) < 30 for q in queries)


def test_a_corpus_smaller_than_the_depth_leaves_short_rankings_counted_in_coverage_and_shown_in_the_report(
    tmp_path: Path,
) -> None:
    tiny = {**SLICE, "max_queries": 5, "corpus_sample": 20}
    cfg = chunking_config(tmp_path, [{"name": "chars_200", "kind": "fixed_chars", "size": 200}], dataset=tiny, depth=50)
    out = run_chunking(cfg, log=lambda _: None)
    run = outcome_of(out, "chars_200+bm25").result.run
    assert all(len(run.docs(q)) <= 20 for q in run.query_ids)  # the corpus ran out before 50 documents
    coverage = flat_system(out.result["chars_200+bm25"])["coverage"]
    assert coverage["short"] == coverage["answered"] == 5 and coverage["depth"] == 50
    report = (tmp_path / "chunking" / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| chars_200 | bm25 |"))
    assert row.endswith("| 5 (depth 50) |") and "returned < depth" in report
    assert "5 (depth 50)" in (tmp_path / "chunking" / "report.html").read_text()


def test_a_document_ranks_at_its_best_chunk(tmp_path: Path) -> None:
    chunker = {"name": "chars_120", "kind": "fixed_chars", "size": 120}
    cfg = chunking_config(tmp_path, [chunker])
    run = outcome_of(run_chunking(cfg, log=lambda _: None), "chars_120+bm25").result.run

    ds, queries = prepare_dataset(DatasetSpec("scifact", "test", 15, 300))
    chunks = make_chunker(chunker).chunk_corpus(joined_corpus(ds.corpus))
    bm25 = create("bm25s", BM25["params"], name="bm25")
    bm25.index(chunks.to_corpus())
    passed_over = 0
    for q in queries:
        best: dict[str, float] = {}
        first: list[int] = []  # chunk rank at which each document first appears
        for rank, (c, score) in enumerate(bm25.search(queries.subset([q]), len(chunks)).ranking(q)):
            if chunks[c].doc_id not in best:
                best[chunks[c].doc_id] = score  # the ranking is best first
                first.append(rank)
        # trec_eval's order of the documents: best chunk's score descending, ties by document id descending
        ranked = sorted(sorted(best.items(), reverse=True), key=lambda d: -d[1])
        got = run.ranking(q)
        np.testing.assert_allclose([s for _, s in got], [s for _, s in ranked[:30]], rtol=0, atol=1e-12)
        # above the 30th document's score the order is exact; documents tied with it at the cut are those
        # the system's own tie order put first (as at any depth), so they are only checked to be among the tied
        last = got[-1][1]
        assert [d for d, s in got if s > last] == [d for d, s in ranked if s > last]
        assert {d for d, s in got if s == last} <= {d for d, s in ranked if s == last}
        passed_over += len(first) >= 30 and first[29] > 29  # lower chunks of top documents came before the 30th
    assert passed_over > 0


def test_span_only_options_on_a_beir_dataset_are_a_config_error_naming_the_field(tmp_path: Path) -> None:
    chunkers = [{"kind": "document"}]
    for field, value in [("token_k", [5]), ("budgets", [256]), ("relevance", {"min_chars": 5}), ("max_queries", 3)]:
        with pytest.raises(ConfigError) as info:
            chunking_config(tmp_path, chunkers, **{field: value})
        assert info.value.field == field and "judged by its qrels" in info.value.reason
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"dataset": SLICE, "token_k": [5], "chunkers": chunkers, "systems": [BM25]}))
    result = CliRunner().invoke(app, ["chunking", str(path), "--output", str(tmp_path / "out")])
    assert result.exit_code == 2 and "token_k" in result.output
    assert not (tmp_path / "out").exists()


def test_a_beir_dataset_named_where_a_chunking_set_is_expected_says_how_to_write_the_dataset_block(
    tmp_path: Path,
) -> None:
    path = tmp_path / "named.yaml"
    path.write_text(yaml.safe_dump({"dataset": "scifact", "chunkers": [{"kind": "document"}], "systems": [BM25]}))
    result = CliRunner().invoke(app, ["chunking", str(path), "--output", str(tmp_path / "out")])
    assert result.exit_code == 2 and "field 'dataset'" in result.output
    assert "dataset: {name: scifact, split: test}" in result.output


@pytest.mark.slow
def test_a_chunking_framework_retriever_returning_fewer_documents_than_the_depth_is_counted_in_the_run_report(
    tmp_path: Path,
) -> None:
    pytest.importorskip("llama_index.core", reason="the frameworks extra is not installed")
    pytest.importorskip("sentence_transformers", reason="the dense extra is not installed")
    li = "retbench.retrievers.frameworks.llamaindex_examples:vector_index"
    params = {"encoder": {"max_seq_length": 128, "batch_size": 32}, "chunk_size": 64}
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        yaml.safe_dump(
            {
                "name": "li",
                "output": str(tmp_path / "run"),
                "depth": 100,
                "metrics": ["ndcg@10", "recall@100"],
                "datasets": [{**SLICE, "max_queries": 8, "corpus_sample": 150}],
                "systems": [{"name": "li", "adapter": "llamaindex", "params": {"factory": li, "params": params}}],
            }
        )
    )
    out = run_experiment(load_experiment(exp), log=lambda _: None, history=False)
    run = outcome_of(out, "li").result.run
    short = sum(len(run.docs(q)) < 100 for q in run.query_ids)
    # 100 chunks of 64 tokens hold fewer than 100 of the 150 documents: the rankings are short, and said so
    assert short > 0 and flat_system(out.result["li"])["coverage"]["short"] == short
    report = (tmp_path / "run" / "report.md").read_text()
    row = next(line for line in report.split("## Coverage", 1)[1].splitlines() if line.startswith("| li |"))
    assert f"| {short} (depth 100) |" in row and "returned < depth" in report


def test_a_bad_dataset_block_is_one_error_naming_its_key(tmp_path: Path) -> None:
    for dataset, field, words in [
        ({**SLICE, "max_querie": 3}, "dataset.max_querie", "did you mean 'max_queries'"),
        ({"split": "test"}, "dataset", "give a dataset name, path, hf or irds"),
        ({**SLICE, "corpus_sample": 0}, "dataset.corpus_sample", "must be >= 1"),
        ("", "dataset", "must be a chunking set's name or folder, or a dataset block mapping"),
    ]:
        with pytest.raises(ConfigError) as info:
            chunking_config(tmp_path, [{"kind": "document"}], dataset=dataset)
        assert info.value.field == field and words in info.value.reason


def test_the_chunking_grid_shows_each_pairs_rank_interval_from_its_per_query_table(tmp_path: Path) -> None:
    """Three (chunker, system) pairs: the main table gains `ndcg@10 rank 95%`, each cell the pair's interval from
    `rank_intervals` over the pairs' stored per-query nDCG@10 (paired over the same queries), tied ones marked."""
    from retbench.resolution import rank_intervals
    from retbench.results import read_results

    chunkers = [
        {"name": "document", "kind": "document"},
        {"name": "chars_300", "kind": "fixed_chars", "size": 300},
        {"name": "chars_1200", "kind": "fixed_chars", "size": 1200},
    ]
    out = run_chunking(chunking_config(tmp_path, chunkers), log=lambda _: None)
    pairs = [o.name for o in out.systems]
    stored = read_results(tmp_path / "chunking")
    evs = [stored.evaluation(p) for p in pairs]
    assert all(ev.query_ids == evs[0].query_ids for ev in evs)
    want = rank_intervals(np.column_stack([ev.column("ndcg@10") for ev in evs]), pairs, n_resamples=2000)
    report = (tmp_path / "chunking" / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| chunker | system |"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    col = cells.index("ndcg@10 rank 95%")
    assert cells[col - len(METRICS)] == "ndcg@10"  # right after the metrics
    for pair in pairs:
        chunker = pair.split("+")[0]
        row = next(line for line in report.splitlines() if line.startswith(f"| {chunker} | bm25 |"))
        shown = [c.strip() for c in row.strip("|").split("|")][col]
        tied = " (tied 1st)" if len(want.tied_first) > 1 and pair in want.tied_first else ""
        assert shown == want.interval(pair) + tied, (pair, shown)
    assert "paired bootstrap resamples of the queries" in report
    assert "ndcg@10 rank 95%" in (tmp_path / "chunking" / "report.html").read_text()
