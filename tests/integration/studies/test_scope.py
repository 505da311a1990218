"""The scope stage: a folder chosen per query, searched inside, recorded, and scored as scope_miss_rate."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from retbench.cli import app
from stored import flat

runner = CliRunner()

# doc id -> (rel_path, text); two folders, two document types
DOCS = {
    "n1": ("notes/cats.md", "cats purr and sleep in the sun"),
    "n2": ("notes/dogs.md", "dogs bark and fetch the ball"),
    "p1": ("papers/fusion.pdf", "reciprocal rank fusion merges rankings"),
    "p2": ("papers/bm25.pdf", "bm25 saturates term frequency"),
}
# query id -> (text, folder the selector will choose, gold doc); hand count of misses: q2 and q4 (2 of 4)
QUERIES = {
    "q1": ("why do cats purr", "notes", "n1"),  # gold in notes, scope notes: inside
    "q2": ("reciprocal rank fusion", "notes", "p1"),  # gold in papers, scope notes: miss
    "q3": ("bm25 term frequency", "papers", "p2"),  # gold in papers, scope papers: inside
    "q4": ("dogs fetch the ball", "archive", "n2"),  # no document in archive: miss, empty, falls back
}


def write_set(root: Path) -> Path:
    data = root / "scoped"
    (data / "qrels").mkdir(parents=True)
    with open(data / "corpus.jsonl", "w") as fh:
        for d, (rel, text) in DOCS.items():
            fh.write(json.dumps({"_id": d, "text": text, "metadata": {"rel_path": rel}}) + "\n")
    with open(data / "queries.jsonl", "w") as fh:
        for q, (text, folder, _) in QUERIES.items():
            fh.write(json.dumps({"_id": q, "text": text, "metadata": {"folder": folder}}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{gold}\t1" for q, (_, _, gold) in QUERIES.items()]
    (data / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return data


def run_scoped(tmp_path: Path, mode: str) -> tuple[dict, Path]:
    system = {"name": "scoped", "adapter": "bm25s", "scope": {"selector": "folder_of_query", "folder_mode": mode}}
    cfg = {
        "name": "t",
        "output": str(tmp_path / "out"),
        "depth": 3,
        "metrics": ["scope_miss_rate", "recall@3"],
        "datasets": [{"name": str(write_set(tmp_path)), "split": "test"}],
        "systems": [system, {"name": "plain", "adapter": "bm25s"}],
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = runner.invoke(app, ["run", str(path), "--quiet"])
    assert result.exit_code == 0, result.output
    return flat(tmp_path / "out"), tmp_path / "out" / "systems"


def status_lines(folder: Path) -> dict[str, dict]:
    return {r["qid"]: r for r in map(json.loads, (folder / "status.jsonl").read_text().splitlines())}


def test_scope_miss_rate_equals_the_hand_count_and_fallback_is_recorded(tmp_path: Path) -> None:
    metrics, systems = run_scoped(tmp_path, "on_with_fallback")
    assert metrics["scoped"]["scope_miss_rate"] == 0.5  # q2 and q4 of 4
    assert metrics["plain"]["scope_miss_rate"] is None  # not applicable: NaN, written as null
    status = status_lines(systems / "scoped")
    assert status["q1"]["scope"]["scope"] == {"folder": "notes"} and not status["q1"]["scope"]["fallback"]
    assert status["q4"]["scope"]["scoped_n"] == 0 and status["q4"]["scope"]["fallback"] is True
    assert status["q4"]["status"] == "ok"  # answered by the unscoped search
    journal = [json.loads(line) for line in (systems / "scoped" / "journal.jsonl").read_text().splitlines()]
    assert {r["qid"]: r["scope"]["fallback"] for r in journal if "scope" in r}["q4"] is True
    assert "scope" in metrics["scoped"]["latency"]["stages"]


def test_a_scoped_search_returns_only_documents_inside_the_scope(tmp_path: Path) -> None:
    _, systems = run_scoped(tmp_path, "on")
    run = (systems / "scoped" / "run.trec").read_text().splitlines()
    ranked = {}
    for line in run:
        q, _, d, *_ = line.split()
        ranked.setdefault(q, []).append(d)
    assert set(ranked["q1"]) <= {"n1", "n2"} and set(ranked["q3"]) <= {"p1", "p2"}
    assert "q4" not in ranked  # nothing in archive and no fallback: empty
    assert status_lines(systems / "scoped")["q4"]["status"] == "empty"


def test_metrics_and_failure_rates_break_down_by_the_gold_documents_type(tmp_path: Path) -> None:
    metrics, _ = run_scoped(tmp_path, "on")
    groups = metrics["scoped"]["breakdown"]
    assert {g: b["n"] for g, b in groups.items()} == {"doc_type:md": 2, "doc_type:pdf": 2}  # q1, q4 | q2, q3
    assert groups["doc_type:md"]["means"]["scope_miss_rate"] == 0.5  # q4 missed, q1 inside
    assert groups["doc_type:md"]["rates"]["empty"] == 0.5  # q4: nothing in archive, no fallback
    # q2: its scope (notes) holds no word of "reciprocal rank fusion", so BM25 returns nothing there
    assert groups["doc_type:pdf"]["rates"] == {"error": 0.0, "timeout": 0.0, "empty": 0.5}


def test_the_reports_show_failure_rates_by_document_type_the_scope_stage_and_why_scope_miss_is_not_compared(
    tmp_path: Path,
) -> None:
    run_scoped(tmp_path, "on")
    out = tmp_path / "out"
    terminal = runner.invoke(app, ["run", str(tmp_path / "exp.yaml")]).output  # finished: the tables again
    report, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    # q4 (md) and q2 (pdf) came back empty in their scopes: 1 of 2 in each type (see the breakdown test above)
    assert "| doc_type:md | 2 | 0.5000 | 0.5000 | 0.0% | 0.0% | 50.0% |" in report
    assert (
        "<td>doc_type:pdf</td><td>2</td><td>0.5000</td><td>0.5000</td><td>0.0%</td><td>0.0%</td><td>50.0%</td>" in html
    )
    assert "failure rates by group" in terminal and "doc_type:pdf" in terminal and "50.0%" in terminal
    for text in (report, html, terminal):
        assert "| scoped | scope |" in text or "<td>scoped</td><td>scope</td>" in text or "│ scoped │ scope  │" in text
    # scope miss rate is a diagnostic, not what systems are ranked or tested on by default: the A/B tests recall@3
    assert "Tested: `plain` (B) against `scoped` (A) on recall@3: 1 test" in report
    # asked for by name, it is not compared for the plain system (no scope stage), and the comparison says why
    asked = runner.invoke(app, ["compare", str(out), "--metrics", "scope_miss_rate,recall@3"])
    assert asked.exit_code == 0, asked.output
    note = "Not compared: scope miss rate: 'plain' has no value on any query (the metric does not apply to it)."
    assert note in asked.output
    assert not re.search(r"\bnan\b", report, re.IGNORECASE)
