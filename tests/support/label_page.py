"""Driving `retbench label serve` in a real browser: start the server as a user does, read the pair on screen,
press a key and wait for the page to show the next pair. Shared by the page's browser tests and the
trace-to-A/B walk-through."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import time
from pathlib import Path

from child_output import line_queue
from repo_paths import SRC

WAIT_MS = 60_000
#: docs/howto/label-study.md's walk-through commands, in order, as the page writes them; the walk-through
#: test runs them and fails when the page changes them
WALK = [
    "retbench traces import spans.json --out traces/ --max-queries 3 --seed 7",
    "retbench label init study/ --dataset traces/ --systems systems.yaml --k 2 --decision live-langchain,bm25",
    "retbench label prelabel study/ --judge judge.yaml",
    "retbench label serve study/ --labeller ann",
    "retbench compare --labels study/",
    "retbench gate --criteria criteria.yaml --labels study/",
]


def start_page(study: Path, port: int, *extra: str) -> tuple[subprocess.Popen, str]:
    """`retbench label serve STUDY --port PORT` in its own process; (process, URL) once it listens."""
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "retbench.cli", "label", "serve", str(study), "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = line_queue(proc)
    seen: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if line.startswith("labelling page for"):
            return proc, line.split(" at ")[-1].strip()
    proc.kill()
    proc.wait(timeout=10)
    raise AssertionError("retbench label serve did not start:\n" + "".join(seen))


def shown(page) -> str:
    """doc_id|qid of the pair on screen."""
    return page.inner_text("#doc-id") + "|" + page.inner_text("#qid")


def press_and_wait_new_pair(page, key: str) -> None:
    """Press `key` and wait until the page shows another pair and is no longer busy."""
    before = shown(page)
    page.keyboard.press(key)
    page.wait_for_function(
        "b => document.getElementById('doc-id').textContent + '|' + document.getElementById('qid').textContent !== b"
        " && !document.body.classList.contains('busy')",
        arg=before,
        timeout=WAIT_MS,
    )
