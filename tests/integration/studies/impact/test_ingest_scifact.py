"""Ingestion impact end to end on a SciFact slice with the real model (a few hundred documents encoded).

The slice: 30 test queries, their relevant documents and 120 others. The study in miniature: the relevant
documents of 6 queries are removed and offered back, next to 5 present documents and 5 near-duplicates.
"""

from __future__ import annotations

import json
import random

import pytest
import yaml
from typer.testing import CliRunner

from retbench.cli import app
from retbench.data import Dataset
from retbench.io.beir import write_beir
from retbench.report.markdown import md_text
from retbench.studies.impact import load_ingest_config, run_ingest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slice_dir(scifact, tmp_path_factory):
    qrels = scifact.split("test")
    rng = random.Random(0)
    qids = sorted(rng.sample(list(qrels), 30))
    gold = {d for q in qids for d in qrels[q]}
    others = rng.sample([d for d in scifact.corpus.ids if d not in gold], 120)
    keep = [d for d in scifact.corpus.ids if d in gold or d in set(others)]
    ds = Dataset(
        "scifact-slice", scifact.corpus.subset(keep), scifact.queries.subset(qids), {"test": qrels.subset(qids)}
    )
    folder = tmp_path_factory.mktemp("scifact_slice")
    write_beir(ds, folder)
    return folder


def _config(folder, out, **over) -> dict:
    raw = {
        "name": "slice",
        "output": str(out),
        "dataset": {"path": str(folder), "split": "test"},
        "retriever": {"adapter": "dense", "params": {"index": "flat_ip", "normalize": True, "max_seq_length": 256}},
        "metrics": ["recall@10", "ndcg@10", "mrr@10"],
        "candidates": [
            {"kind": "gold", "queries": 6, "seed": 0},
            {"kind": "present", "n": 5, "seed": 1},
            {"kind": "near_duplicate", "n": 5, "edits": 3, "seed": 2},
        ],
        "modes": ["alone", "leave_one_out", "sequential"],
        "leave_one_out": {"group": "present"},
        "context_recall": {"references": "gold_documents", "threshold": 0.8, "context_k": 2},
        "gain": {"alpha": 1.0, "beta": 1.0, "gamma": 0.01},
    }
    raw.update(over)
    return raw


def _run(tmp_path, raw, name="ingest.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return run_ingest(load_ingest_config(path), log=lambda m: None)


@pytest.fixture(scope="module")
def study(slice_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ingest_study")
    return tmp, _run(tmp, _config(slice_dir, tmp / "out"))


def test_study_in_miniature(study):
    _tmp, outcome = study
    alone = outcome.results["alone"]
    groups = {g: [i for i in alone if i.group == g] for g in ("gold", "present", "near_duplicate")}
    assert len(groups["present"]) == 5 and len(groups["near_duplicate"]) == 5 and len(groups["gold"]) >= 6
    gold, others = groups["gold"], groups["present"] + groups["near_duplicate"]
    # removed gold documents come back to their own queries and rank above every other candidate by gain
    assert all(i.own_deltas["recall@10"] > 0 for i in gold)
    assert min(i.gain for i in gold) > max(i.gain for i in others)
    assert [i.group for i in alone[: len(gold)]] == ["gold"] * len(gold)
    assert all(set(i.own_queries) & set(i.gained) for i in gold)
    # present documents: a no-op (status reported), nearest document themselves
    for i in groups["present"]:
        assert i.status == "present" and i.changed == [] and set(i.deltas.values()) == {0.0}
        assert i.novelty.min < 1e-5 and i.novelty.nearest_doc == i.doc_id
    # near-duplicates: not novel, nearest is the original
    for i in groups["near_duplicate"]:
        assert i.status == "new" and i.novelty.min < 0.05 and i.novelty.nearest_doc == i.doc_id.removesuffix("~nd")
    # context recall with the gold documents as references: gold text back in the top 2 raises it
    assert 0.0 <= outcome.before["context_recall"] < 1.0
    assert sum(i.d_context_recall for i in gold) > 0
    # sequential, best first: everything in, so the final metrics are K plus all new candidates
    seq = outcome.results["sequential"]
    assert [i.status for i in seq].count("present") == 5
    assert seq[-1].after["recall@10"] > outcome.before["recall@10"]
    # leave-one-out of the present documents
    assert {i.doc_id for i in outcome.results["leave_one_out"]} == {i.doc_id for i in groups["present"]}


def test_results_directory_and_report(study, slice_dir):
    tmp, outcome = study
    out = tmp / "out"
    for f in ("manifest.json", "summary.json", "candidates.json", "sequential.json", "leave_one_out.json", "report.md"):
        assert (out / f).is_file(), f
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["engine"].startswith("dense exact incremental") and manifest["versions"]["numpy"]
    n_docs = len((slice_dir / "corpus.jsonl").read_text().splitlines())
    assert manifest["knowledge_base"]["documents"] == n_docs - manifest["candidates"]["removed"]
    cands = json.loads((out / "candidates.json").read_text())
    assert [c["doc_id"] for c in cands] == [i.doc_id for i in outcome.results["alone"]]
    assert cands[0]["novelty"]["chunks"][0]["nearest_doc"] == cands[0]["novelty"]["nearest_doc"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["study"]["gold"]["all_gold_above_all_others"] is True
    assert summary["study"]["present"]["recall_unchanged"] == 5
    report = (out / "report.md").read_text()
    assert "## Candidates ranked by gain" in report and "## Study checks" in report
    res = manifest["resources"]
    for stage in ("prepare", "index", "novelty_index", "modes"):
        assert res[f"{stage}_peak_rss_mib"] > 0, stage
    assert res["index_docs_per_s"] > 0 and res["devices"] == ["cpu"]
    assert "Resources: peak RSS MiB" in report and "index docs/s" in report
    assert all(f"| {md_text(i.doc_id)} |" in report for i in outcome.results["alone"])  # ids as inert Markdown


def test_incremental_equals_add_and_rerun(study, slice_dir):
    tmp, fast = study
    slow = _run(tmp, _config(slice_dir, tmp / "slow", engine="rebuild"), "slow.yaml")
    assert slow.summary["engine"].startswith("rebuild")
    for mode in ("alone", "leave_one_out", "sequential"):
        a = {i.doc_id: i for i in fast.results[mode]}
        b = {i.doc_id: i for i in slow.results[mode]}
        assert a.keys() == b.keys()
        for d, x in a.items():
            y = b[d]
            assert sorted(x.changed) == sorted(y.changed), (mode, d)
            assert x.deltas == pytest.approx(y.deltas, abs=1e-9), (mode, d)
            assert x.d_context_recall == pytest.approx(y.d_context_recall, abs=1e-9), (mode, d)
            assert x.gain == pytest.approx(y.gain, abs=1e-9)


def test_cli_with_bm25_and_a_bad_config(slice_dir, tmp_path):
    raw = _config(
        slice_dir,
        tmp_path / "bm25",
        modes=["alone"],
        context_recall=None,
        retriever={"adapter": "bm25s", "params": {"stopwords": "en", "stemmer": "english"}},
        encoder={"max_seq_length": 256},
    )
    raw["candidates"] = [{"kind": "gold", "queries": 3, "seed": 0}, {"kind": "present", "n": 2}]
    cfg = tmp_path / "bm25.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["ingest-impact", str(cfg), "--top", "3"])
    assert res.exit_code == 0, res.output
    assert "ranked by gain" in res.output
    summary = json.loads((tmp_path / "bm25" / "summary.json").read_text())
    assert summary["engine"].startswith("rebuild (add")
    assert summary["study"]["gold"]["positive_own_delta_recall"] >= 1
    raw["metrics"] = ["map"]
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["ingest-impact", str(cfg)])
    assert res.exit_code == 2 and "field 'metrics'" in res.output
