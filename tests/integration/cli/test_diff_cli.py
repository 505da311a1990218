"""`retbench diff` as people run it (a subprocess) on the shipped SciFact: two BM25 settings, one run written by
retbench and one by ranx (another tool's TREC writer); the HTML page laid out by headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from browser import CHROMIUM, dump_dom
from retbench.data import Run
from retbench.io.trec import write_run
from retbench.retrievers import create

ranx = pytest.importorskip("ranx", reason="the dev extra (ranx) is not installed")


def _bm25_run(scifact, qids: list[str], **params: object) -> dict[str, dict[str, float]]:
    retriever = create("bm25s", params)
    retriever.index(scifact.corpus)
    rankings = retriever.search_batch([scifact.queries[q] for q in qids], 20)
    return {q: {d: float(s) for d, s in r} for q, r in zip(qids, rankings, strict=True)}


@pytest.fixture(scope="module")
def runs(scifact, tmp_path_factory) -> tuple[Path, Path, dict, dict]:
    base = tmp_path_factory.mktemp("diff")
    qids = list(scifact.split("test"))[:120]
    a = _bm25_run(scifact, qids, k1=1.5, b=0.75)
    b = _bm25_run(scifact, qids, k1=0.9, b=0.4)
    write_run(Run.from_dict(a, name="bm25"), base / "a.trec")
    ranx.Run(b, name="bm25_tuned").save(str(base / "b.trec"), kind="trec")
    return base / "a.trec", base / "b.trec", a, b


def _top(run: dict[str, float], k: int) -> list[str]:
    """trec_eval's order: score descending, ties by doc id descending."""
    return [d for d, _ in sorted(run.items(), key=lambda x: (x[1], x[0]), reverse=True)][:k]


def test_diff_cli_counts_the_changed_queries_and_renders_the_moved_ones_in_chromium(runs, scifact_path, tmp_path):
    a_path, b_path, a, b = runs
    out = tmp_path / "diff.json"
    page = tmp_path / "diff.html"
    done = subprocess.run(
        [sys.executable, "-m", "retbench.cli", "diff", str(a_path), str(b_path), "--qrels",
         str(scifact_path / "qrels" / "test.tsv"), "--queries", str(scifact_path / "queries.jsonl.gz"),
         "--json", str(out), "--html", str(page), "--resamples", "500", "--top", "5"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    changed = sum(set(_top(a[q], 10)) != set(_top(b[q], 10)) for q in a)
    assert got["counts"]["changed_set"] == changed > 0
    assert f"{changed} of {len(a)} queries" in done.stdout
    assert got["labelled"]["n"] == len(a) and got["labelled"]["metric"] == "ndcg@10"
    assert len(got["moved"]) == 5
    if CHROMIUM is None:
        pytest.skip("Chromium not installed (Debian: apt-get install -y chromium)")
    dom = dump_dom(page, "", tmp_path / "profile")
    moved = re.search(r'<section id="moved">(.*?)</section>', dom, flags=re.S)
    assert moved, "the moved-queries section is missing"
    for m in got["moved"]:
        assert m["qid"] in moved.group(1) and m["top_b"][0] in moved.group(1)


def test_diff_cli_names_a_missing_file_and_exits_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "retbench.cli", "diff", str(tmp_path / "nope.trec"), str(tmp_path / "nope.trec")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "nope.trec" in done.stderr
