"""Migration canary on a query log without qrels (a BEIR folder as `retbench traces import` writes one, cut from
the shipped SciFact): two BM25 settings searched, diffed, and only the changed queries pooled for labelling."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from retbench.errors import ConfigError
from retbench.studies.canary import log_difference, run_canary
from retbench.studies.labels.study import read_study


def _log_folder(scifact_path: Path, out: Path, n_docs: int = 400, n_queries: int = 40) -> Path:
    """The first documents and queries of SciFact as a BEIR folder with no qrels (a query log)."""
    out.mkdir()
    with gzip.open(scifact_path / "corpus.jsonl.gz", "rt") as f:
        docs = [next(f) for _ in range(n_docs)]
    (out / "corpus.jsonl").write_text("".join(docs))
    with gzip.open(scifact_path / "queries.jsonl.gz", "rt") as f:
        queries = [next(f) for _ in range(n_queries)]
    (out / "queries.jsonl").write_text("".join(queries))
    return out


def _config(tmp_path: Path, log: Path, systems: str) -> Path:
    path = tmp_path / "canary.yaml"
    path.write_text(f"name: canary\ndatasets: [{log}]\nsystems:\n{systems}")
    return path


TWO = (
    "  - {name: current, adapter: bm25s, params: {k1: 1.5, b: 0.75}}\n"
    "  - {name: candidate, adapter: bm25s, params: {k1: 0.6, b: 0.3, stopwords: en}}\n"
)


def test_canary_diffs_the_log_and_pools_only_the_changed_queries(scifact_path, tmp_path):
    log = _log_folder(scifact_path, tmp_path / "log")
    said: list[str] = []
    canary = run_canary(_config(tmp_path, log, TWO), tmp_path / "out", n_resamples=200, note=said.append)
    changed = set(canary.diff.changed_queries(as_order=True))
    assert 0 < len(changed) <= 40 and canary.diff.counts["queries"] == 40
    assert not any("datasets are not used" in line for line in said)  # the log is the config's own dataset
    assert canary.study is not None
    pooled = {p["qid"] for p in read_study(tmp_path / "out" / "study").pairs}
    assert pooled == changed  # labels go only where the systems disagree
    meta = json.loads((tmp_path / "out" / "study" / "study.json").read_text())
    assert meta["decision"] == {"a": "current", "b": "candidate"}
    assert (tmp_path / "out" / "canary.html").read_text().count("<section") >= 2
    assert json.loads((tmp_path / "out" / "canary.json").read_text())["counts"]["changed_order"] == len(changed)
    whole = log_difference({"mean": 0.1, "low": 0.02, "high": 0.18}, len(changed), 40)
    assert whole["mean"] == pytest.approx(0.1 * len(changed) / 40)


def test_a_canary_needs_exactly_two_systems(scifact_path, tmp_path):
    log = _log_folder(scifact_path, tmp_path / "log", 50, 5)
    one = _config(tmp_path, log, "  - {name: current, adapter: bm25s}\n")
    with pytest.raises(ConfigError, match="two systems") as err:
        run_canary(one, tmp_path / "out")
    assert "canary.yaml" in str(err.value)
