"""Metadata filters on queries: the filter language, exact matching, and refusal by systems without filters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from retbench.cli import app
from retbench.errors import ConfigError
from retbench.retrievers.filters import metadata_fields, parse_filter

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
