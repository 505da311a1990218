"""A write that runs out of room: one line naming the file asked for and the system's reason, exit 2, no temp file.

The disk is made "full" with a real limit of the operating system, not a mock: the command runs in a child
process under RLIMIT_FSIZE (the largest file it may write), so a write past it fails with EFBIG exactly where a
full disk fails with ENOSPC (Python ignores SIGXFSZ, so the write returns the error instead of killing it).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

RETBENCH = [sys.executable, "-m", "retbench.cli"]


def _run_limited(args: list[str], cwd: Path, limit: int) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = dict(os.environ)
    env["RETBENCH_HISTORY"] = str(cwd / "history.sqlite")
    env["RETBENCH_CACHE"] = str(cwd / "cache")
    return subprocess.run(
        [*RETBENCH, *args], cwd=cwd, env=env, preexec_fn=cap, capture_output=True, text=True, timeout=300, check=False
    )


def _temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and p.name.endswith(".tmp")]


@pytest.fixture()
def trec_pair(tmp_path: Path) -> tuple[Path, Path]:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq2 0 d3 1\n")
    run = tmp_path / "run.txt"
    run.write_text("".join(f"{q} Q0 d{i} {i + 1} {1000 - i} sys\n" for q in ("q1", "q2") for i in range(200)))
    return qrels, run


def test_a_per_query_table_that_does_not_fit_names_the_file_keeps_the_old_one_and_leaves_no_temp_file(
    tmp_path, trec_pair
):
    qrels, run = trec_pair
    out = tmp_path / "out"
    out.mkdir()
    table = out / "table.tsv"
    table.write_text("the previous table\n")
    done = _run_limited(["eval", str(qrels), str(run), "--tsv", str(table)], tmp_path, limit=100)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"error: {table}: could not write this file: File too large [EFBIG]; the previous version, if any, is kept"
    ]
    assert table.read_text() == "the previous table\n"
    assert _temp_files(out) == []


@pytest.mark.parametrize("limit", [3_000, 20_000])
def test_a_results_folder_that_does_not_fit_is_one_message_and_leaves_no_temp_file(tmp_path, limit):
    config = tmp_path / "bm25.yaml"
    config.write_text(
        "name: full\noutput: results\ndepth: 100\nmetrics: [ndcg@10]\n"
        "datasets:\n  - {name: scifact, split: test, max_queries: 20, corpus_sample: 200, seed: 0}\n"
        "systems:\n  - {name: bm25, adapter: bm25s, params: {k1: 1.5, b: 0.75}}\n"
    )
    done = _run_limited(["run", str(config)], tmp_path, limit=limit)
    assert done.returncode in (2, 3), done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("error: ") and "results/" in said and "could not write this file" in said, said
    assert _temp_files(tmp_path / "results") == []
