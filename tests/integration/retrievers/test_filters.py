"""Metadata filters on queries: the filter language, exact matching, and refusal by systems without filters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from repo_paths import SCIFACT
from retbench.cli import app
from retbench.errors import ConfigError
from retbench.results import read_results
from retbench.retrievers.filters import metadata_fields, parse_filter
from stored import flat

runner = CliRunner()


def test_equality_and_ranges_must_all_hold_and_a_missing_field_never_matches():
    f = parse_filter({"lang": "en", "year": {"gte": 2010, "lt": 2020}})
    assert f.matches({"lang": "en", "year": 2010}) and f.matches({"lang": "en", "year": 2019.5})
    assert not f.matches({"lang": "en", "year": 2020}) and not f.matches({"lang": "de", "year": 2015})
    assert not f.matches({"lang": "en"}) and not f.matches(None)
    assert not f.matches({"lang": "en", "year": "2015"})  # a range holds only for numbers
    assert parse_filter({"open": True}).matches({"open": True}) and not parse_filter({"open": True}).matches(
        {"open": 1}
    )
    assert parse_filter({"n": 1}).matches({"n": 1.0}) and not parse_filter({"n": 1}).matches({"n": True})
    assert f.as_dict() == {"lang": "en", "year": {"gte": 2010, "lt": 2020}}
    assert parse_filter(None) is None and parse_filter({}) is None


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("en", "must be a mapping"),
        ({"bad field": 1}, "must be an identifier"),
        ({"year": {"from": 2010}}, "unknown range operator 'from'"),
        ({"year": {"gte": "2010"}}, "must be a number"),
        ({"tags": ["a"]}, "string, number or boolean"),
        ({"year": {}}, "empty range"),
    ],
)
def test_bad_filters_are_config_errors_naming_the_field(spec, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_filter(spec, where="query q1: metadata.filter")


def test_metadata_fields_are_typed_from_the_corpus_and_mixed_types_are_left_out():
    fields = metadata_fields([{"year": 2001, "lang": "en", "x": 1}, {"year": 2002.5, "lang": "de", "x": "a"}, {}])
    assert fields == {"year": float, "lang": str}


def _dataset(folder: Path) -> Path:
    docs = [
        ("d1", "statins lower cholesterol in adults", {"year": 2005}),
        ("d2", "statins and cholesterol in children", {"year": 2015}),
        ("d3", "volcanic ash and air travel", {"year": 2015}),
    ]
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t, "metadata": m}) + "\n" for d, t, m in docs)
    )
    queries = [{"_id": "q1", "text": "statins cholesterol", "metadata": {"filter": {"year": {"gte": 2010}}}}]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    return folder


def test_a_run_with_filtered_queries_filters_dense_search_and_refuses_bm25_before_indexing(tmp_path):
    data = _dataset(tmp_path / "data")
    dense = {"name": "dense", "adapter": "dense", "params": {"index": "flat_ip", "max_seq_length": 64}}
    cfg = {"name": "f", "output": str(tmp_path / "out"), "depth": 10, "metrics": ["ndcg@10"]}
    cfg["datasets"] = [{"name": str(data), "split": "test"}]
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**cfg, "systems": [dense]}))
    result = runner.invoke(app, ["run", str(path), "--quiet"])
    assert result.exit_code == 0, result.output
    from retbench.results import load_results

    run = load_results(tmp_path / "out").run("dense")
    assert list(run.docs("q1")) == ["d2", "d3"]  # d1 (2005) is filtered out; the filter is exact
    bm25 = {"name": "bm25", "adapter": "bm25s", "params": {}}
    path.write_text(yaml.safe_dump({**cfg, "output": str(tmp_path / "out2"), "systems": [bm25]}))
    result = runner.invoke(app, ["run", str(path), "--quiet"])
    assert result.exit_code == 2, result.output
    assert "metadata.filter" in result.output and "cannot apply metadata filters" in result.output
    assert not list((tmp_path / "out2").rglob("*.trec"))  # refused before indexing or searching


def _scifact_slice(folder: Path, n_queries: int = 16, n_docs: int = 300) -> Path:
    """Real SciFact text: the judged documents of the first test queries plus others, each with a `group` field;
    every other query carries a filter on it."""
    import gzip

    src = SCIFACT
    qrels = [line.split("\t") for line in (src / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    qids = list(dict.fromkeys(q for q, _, _ in qrels))[:n_queries]
    wanted = {d for q, d, _ in qrels if q in qids}
    docs = []
    with gzip.open(src / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["_id"] in wanted or len(docs) < n_docs - len(wanted):
                docs.append({**d, "metadata": {"group": len(docs) % 2}})
    with gzip.open(src / "queries.jsonl.gz", "rt", encoding="utf-8") as fh:
        texts = {q["_id"]: q["text"] for q in map(json.loads, fh)}
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [
        {"_id": q, "text": texts[q], **({"metadata": {"filter": {"group": 0}}} if i % 2 else {})}
        for i, q in enumerate(qids)
    ]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels").mkdir()
    rows = [f"{q}\t{d}\t{s}" for q, d, s in qrels if q in qids]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    return folder


def test_overlap_with_the_reference_system_is_stored_and_reported_overall_and_on_filtered_queries(tmp_path):
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report
    from retbench.results import load_results

    data = _scifact_slice(tmp_path / "data")
    emb = {"max_seq_length": 128, "batch_size": 64}
    systems = [
        {"name": "exact", "adapter": "dense", "params": {**emb, "index": "flat_ip"}},
        {"name": "exact-again", "adapter": "dense", "params": {**emb, "index": "flat_ip", "batch_size": 32}},
        {"name": "hnsw", "adapter": "dense", "params": {**emb, "index": "hnsw", "M": 4, "ef_search": 1}},
    ]
    cfg = {"name": "agree", "output": str(tmp_path / "out"), "depth": 20, "metrics": ["ndcg@10", "recall@10"]}
    cfg |= {"datasets": [{"name": str(data), "split": "test"}], "systems": systems, "reference": "exact"}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = runner.invoke(app, ["run", str(path), "--quiet"])
    assert result.exit_code == 0, result.output

    res = load_results(tmp_path / "out")
    metrics = flat(tmp_path / "out")
    assert "reference" not in metrics["exact"]
    same = metrics["exact-again"]["reference"]
    assert same["system"] == "exact" and same["k"] == 10 and same["queries"] == 16 and same["overlap"] == 1.0
    assert same["filtered_queries"] == 8 and same["filtered_overlap"] == 1.0
    ref, ann = res.run("exact"), res.run("hnsw")

    def overlap(qids):
        return sum(len(set(ann.docs(q)[:10]) & set(ref.docs(q)[:10])) / len(ref.docs(q)[:10]) for q in qids) / len(qids)

    filtered = [q for i, q in enumerate(res.queries) if i % 2]
    block = metrics["hnsw"]["reference"]
    assert 0 < block["overlap"] < 1  # a starved HNSW (ef_search 1) misses some of the exact top 10
    assert block["overlap"] == pytest.approx(overlap(list(res.queries)), abs=1e-12)
    assert block["filtered_overlap"] == pytest.approx(overlap(filtered), abs=1e-12)
    groups = {d["_id"]: d["metadata"]["group"] for d in map(json.loads, (data / "corpus.jsonl").open())}
    assert all(groups[d] == 0 for q in filtered for run in (ref, ann) for d in run.docs(q))  # filters applied
    text = report_markdown(build_report(read_results(tmp_path / "out")))
    assert "## Agreement with the reference system" in text
    assert f"| hnsw | exact (k=10) | {block['overlap']:.3f} | 16 | {block['filtered_overlap']:.3f} | 8 |" in text


def test_a_reference_that_names_no_system_is_a_config_error_naming_the_field(tmp_path):
    cfg = {"name": "x", "datasets": [{"name": "scifact"}], "systems": [{"name": "bm25", "adapter": "bm25s"}]}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**cfg, "reference": "faiss"}))
    result = runner.invoke(app, ["run", str(path), "--quiet"])
    assert result.exit_code == 2 and "reference" in result.output and "bm25" in result.output, result.output
    path.write_text(
        yaml.safe_dump({**cfg, "depth": 5, "metrics": ["ndcg@5"], "reference": {"system": "bm25", "k": 10}})
    )
    result = runner.invoke(app, ["run", str(path), "--quiet"])
    assert result.exit_code == 2 and "reference.k" in result.output and "depth" in result.output, result.output
