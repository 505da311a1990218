"""`retbench traces import` as a person runs it: a subprocess over a log the test writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from repo_paths import ROOT

LOG = [
    {
        "query": "What is BM25?",
        "retrieved": [{"id": "d1", "score": 2.0, "text": "Okapi BM25"}, "d2"],
        "timestamp": "2026-05-01T12:00:00Z",
        "feedback": {"kind": "thumbs", "value": -1},
    },
    {"query": "what is bm25", "retrieved": ["d2"], "timestamp": "2026-05-01T13:00:00Z"},
    {"query": "dense retrieval", "retrieved": [{"score": 1.0}], "id": "req-3", "timestamp": "2026-05-01T14:00:00Z"},
    {"query": "late query", "retrieved": ["d9"], "timestamp": "2026-05-02T00:00:00Z"},
]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "retbench.cli", "traces", "import", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_traces_import_writes_the_dataset_folder_and_reports_each_malformed_span(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in LOG))
    out = tmp_path / "ds"
    done = _cli(str(log), "--out", str(out), "--until", "2026-05-02", "--system", "live-search")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"malformed: {log}:3: span req-3: field 'retrieved.0.document.id': missing (and no 'id' in the document's metadata)"
    ]
    assert "1 near duplicates merged" in done.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "corpus.jsonl",
        "feedback.jsonl",
        "import.json",
        "queries.jsonl",
        "runs",
    ]
    assert (out / "runs" / "live-search.trec").read_text().splitlines()[0].endswith(" 1 2.0 live-search")
    summary = json.loads((out / "import.json").read_text())
    assert summary["window"]["outside"] == 1 and summary["malformed"]["count"] == 1
    assert json.loads((out / "feedback.jsonl").read_text())["value"] == -1

    strict = _cli(str(log), "--out", str(tmp_path / "strict"), "--strict")
    assert strict.returncode == 2 and (tmp_path / "strict" / "import.json").is_file()


def test_traces_import_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = _cli(str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o"))
    assert (
        missing.returncode == 2 and missing.stderr.strip() == f"error: {tmp_path / 'nope.jsonl'}: trace file not found"
    )
    (tmp_path / "x.json").write_text('{"hello": 1}')
    other = _cli(str(tmp_path / "x.json"), "--out", str(tmp_path / "o"))
    assert other.returncode == 2 and "not a trace export" in other.stderr and "Traceback" not in other.stderr
    when = _cli(str(tmp_path / "x.json"), "--out", str(tmp_path / "o"), "--since", "last tuesday")
    assert when.returncode == 2 and "--since" in when.stderr
