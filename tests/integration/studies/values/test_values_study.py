"""`retbench values` end to end on a small BEIR folder with the default dense model and with BM25.

The folder plants what the study must find: an exact copy of a document (a near-duplicate group), a document
that quotes a query verbatim (a leak), and for the query about whales an off-topic document stuffed with the
query's words that outranks the relevant one (a harmful document under BM25's ranking).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from retbench.errors import ConfigError
from retbench.studies.values import load_values_config, run_values

pytestmark = pytest.mark.slow

DOCS = {
    "whale": ("Blue whales", "The blue whale is the largest animal known and feeds on krill in cold oceans."),
    "whale-copy": ("Blue whales", "The blue whale is the largest animal known and feeds on krill in cold oceans."),
    "stuffed": ("Largest animal", "largest animal largest animal ocean ocean what is the largest animal in the ocean"),
    "bread": ("Sourdough", "Sourdough bread rises with wild yeast and lactic acid bacteria over many hours."),
    "yeast": ("Baker's yeast", "Saccharomyces cerevisiae ferments sugars into carbon dioxide and ethanol."),
    "leak": ("FAQ", "Readers often ask: how do volcanoes form at plate boundaries? Magma rises where plates part."),
    "volcano": ("Volcanoes", "Volcanoes form where tectonic plates diverge or converge and magma reaches the surface."),
    "moon": ("Tides", "The moon's gravity raises tides in the oceans twice a day."),
}
QUERIES = {
    "q1": "what is the largest animal in the ocean",
    "q2": "how does sourdough bread rise",
    "q3": "how do volcanoes form at plate boundaries?",
    "q4": "what causes ocean tides",
}
QRELS = [("q1", "whale"), ("q2", "bread"), ("q2", "yeast"), ("q3", "volcano"), ("q4", "moon")]


def _folder(root: Path) -> Path:
    data = root / "kb"
    (data / "qrels").mkdir(parents=True)
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, (t, x) in DOCS.items())
    )
    (data / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (data / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in QRELS)
    )
    return data


def _run(tmp_path: Path, **settings: object):
    config = {"name": "kb-values", "dataset": {"path": str(_folder(tmp_path))}, "k": 1, "top": 10, **settings}
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(config))
    cfg = load_values_config(path, tmp_path / "out")
    return run_values(cfg, log=lambda m: None), tmp_path / "out"


def test_dense_exact_values_sum_to_recall_and_the_study_finds_the_planted_copy_and_leak(tmp_path: Path) -> None:
    outcome, out = _run(tmp_path, utility="recall", monte_carlo={"permutations": 100, "check": True})
    s = outcome.summary
    assert s.method == "exact" and s.utility == "recall@1"
    values = {r["doc_id"]: r["value"] for r in json.loads((out / "values.json").read_text())}
    assert sum(values.values()) == pytest.approx(s.utility_of_corpus, abs=1e-9)
    groups = s.near_duplicates.largest
    assert any(set(g.doc_ids) == {"whale", "whale-copy"} for g in groups)
    leak = {x.query_id: x for x in s.leaks.leaked}
    assert leak["q3"].text_in == ["leak"]
    assert s.monte_carlo_check is not None and s.monte_carlo_check.correlation > 0.9
    report = (out / "report.md").read_text()
    assert "## Harmful documents" in report and "## Leaks" in report and "whale-copy" in report
    assert {"manifest.json", "summary.json", "values.json", "report.md"} <= {p.name for p in out.iterdir()}


def test_bm25_monte_carlo_names_the_stuffed_document_as_harmful_and_what_it_displaced(tmp_path: Path) -> None:
    outcome, _ = _run(tmp_path, retriever={"adapter": "bm25s"}, utility="ndcg", monte_carlo={"permutations": 300})
    s = outcome.summary
    assert s.method == "monte_carlo" and s.utility == "ndcg@1"
    harm = {h.doc_id: h for h in s.harmful}
    assert "stuffed" in harm
    hurt = harm["stuffed"].queries_hurt[0]
    assert hurt.query_id == "q1"
    assert hurt.displaced[0].doc_id in {"whale", "whale-copy"}
    values = np.array([r.value for r in outcome.documents])
    assert values.sum() == pytest.approx(s.utility_of_corpus, abs=1e-9)  # every permutation telescopes


def test_exact_values_asked_of_bm25_are_refused_naming_the_method(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="exact values need a dense retriever") as exc:
        _run(tmp_path, retriever={"adapter": "bm25s"}, method="exact")
    assert exc.value.field == "method"
