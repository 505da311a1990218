"""`retbench diff` as people run it (a subprocess) on run files written by other tools: a pyserini/Anserini-style
file laid out loosely (tabs and runs of spaces, trailing blanks, CRLF line ends, a blank line, queries
interleaved rather than grouped, scores in exponent notation, the tool's one fixed tag), compared with the same
rankings as retbench writes them, and with a copy where some queries were changed on purpose. Also an MS MARCO
style three-column file (pyserini's `--output-format msmarco`), which is not a TREC run: refused, naming the line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from retbench.data import Run
from retbench.io.trec import write_run


def _rankings(n_queries: int = 30, depth: int = 20) -> dict[str, dict[str, float]]:
    """Seeded rankings over SciFact-like numeric doc ids, with one tied pair of scores per query."""
    rng = np.random.default_rng(5)
    out = {}
    for i in range(n_queries):
        docs = rng.choice(5000, size=depth, replace=False)
        scores = np.sort(rng.uniform(5, 40, size=depth))[::-1].round(4)
        scores[3] = scores[4]  # a tie: both files must order it the same way (trec_eval: doc id descending)
        out[f"{1000 + i}"] = {str(d): float(s) for d, s in zip(docs, scores, strict=True)}
    return out


def _loose_trec(path: Path, run: dict[str, dict[str, float]]) -> None:
    """The six TREC columns with whatever spacing another tool or a hand edit leaves, queries interleaved."""
    lines = []
    seps = ["\t", "  ", " \t ", "   "]
    for depth in range(max(len(r) for r in run.values())):  # rank 1 of every query, then rank 2, ...
        for n, (q, ranking) in enumerate(run.items()):
            ranked = sorted(ranking.items(), key=lambda x: (x[1], x[0]), reverse=True)
            if depth >= len(ranked):
                continue
            doc, score = ranked[depth]
            sep = seps[(n + depth) % len(seps)]
            cols = [q, "Q0", doc, str(depth + 1), f"{score:.6e}", "Anserini"]
            lines.append(sep.join(cols) + ("  " if depth % 3 == 0 else "") + "\r\n")
        if depth == 2:
            lines.append("\r\n")
    path.write_bytes("".join(lines).encode("ascii"))


def _diff(a: Path, b: Path, out: Path, k: int = 10) -> tuple[subprocess.CompletedProcess[str], dict]:
    done = subprocess.run(
        [sys.executable, "-m", "retbench.cli", "diff", str(a), str(b), "--k", str(k), "--json", str(out),
         "--resamples", "200"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done, json.loads(out.read_text()) if done.returncode == 0 else {}


def test_a_loosely_spaced_pyserini_run_reads_as_the_same_rankings(tmp_path: Path) -> None:
    run = _rankings()
    write_run(Run.from_dict(run, name="bm25"), tmp_path / "current.trec")
    _loose_trec(tmp_path / "pyserini.trec", run)
    done, got = _diff(tmp_path / "current.trec", tmp_path / "pyserini.trec", tmp_path / "same.json")
    assert done.returncode == 0, done.stderr
    assert got["counts"] == {
        "queries": 30, "only_a": 0, "only_b": 0, "failed_a": 0, "failed_b": 0, "changed_set": 0, "changed_order": 0,
    }  # fmt: skip
    rbo = next(m for m in got["measures"] if m["name"] == "rbo_ext")
    assert rbo["mean"] == 1.0 and got["b"] == "Anserini"


def test_changes_in_a_loosely_spaced_run_are_counted_query_by_query(tmp_path: Path) -> None:
    run = _rankings()
    changed = {q: dict(r) for q, r in run.items()}
    qids = list(run)
    top = {q: sorted(r, key=lambda d: (r[d], d), reverse=True) for q, r in run.items()}
    for q in qids[:4]:  # swap ranks 1 and 2: same top-10 set, another order
        first, second = top[q][0], top[q][1]
        changed[q][first], changed[q][second] = run[q][second], run[q][first]
    for q in qids[4:7]:  # rank 5 falls to the bottom: another top-10 set
        changed[q][top[q][4]] = 0.5
    _loose_trec(tmp_path / "a.trec", run)  # both files from "the other tool": one tag, so named by file
    _loose_trec(tmp_path / "b.trec", changed)
    done, got = _diff(tmp_path / "a.trec", tmp_path / "b.trec", tmp_path / "moved.json")
    assert done.returncode == 0, done.stderr
    assert got["counts"]["changed_set"] == 3 and got["counts"]["changed_order"] == 7
    assert sorted(got["changed_queries"]) == sorted(qids[4:7])
    assert (got["a"], got["b"]) == ("a", "b") and "3 of 30 queries" in done.stdout


def test_a_three_column_msmarco_file_is_refused_naming_its_line(tmp_path: Path) -> None:
    run = _rankings(3, 5)
    write_run(Run.from_dict(run, name="bm25"), tmp_path / "current.trec")
    (tmp_path / "run.msmarco.tsv").write_text(
        "".join(f"{q}\t{d}\t{r}\n" for q, docs in run.items() for r, d in enumerate(docs, 1))
    )
    done = subprocess.run(
        [sys.executable, "-m", "retbench.cli", "diff", str(tmp_path / "current.trec"), str(tmp_path / "run.msmarco.tsv")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "run.msmarco.tsv:1" in done.stderr and "expected 6 columns" in done.stderr
