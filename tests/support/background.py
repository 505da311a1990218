"""Long subprocess checks that start when collection ends and run beside the session, at a low priority.

A test marked `@pytest.mark.background(argv, cwd=...)` (mypy over src/, the README's unit-tier command) asks for
the finished process with the `background_result` fixture. Most of the suite keeps one core busy, so on a 2-core
machine the check runs on the other core while earlier tests run, and the test only waits for what is left. The
process is the one the test would have started itself, with the same arguments, working directory and
environment, less the temporary folders this session made for itself (the child makes its own), so the two
sessions never share a history database or cache. Run alone, the test starts its check and waits: as before.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

NICENESS = 10  # below the session's own tests, which keep their priority


@dataclass
class Job:
    """One check's process, its output files and its wall time (from start to exit)."""

    argv: list[str]
    cwd: Path
    proc: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    started: float = field(default_factory=time.monotonic)
    seconds: float | None = None

    def wait(self, timeout: float) -> subprocess.CompletedProcess[str]:
        """The finished process like `subprocess.run(..., capture_output=True, text=True)` gives it; on timeout
        the process group is stopped and `subprocess.TimeoutExpired` raised, as `run(timeout=...)` does."""
        remaining = timeout - (time.monotonic() - self.started)
        try:
            code = self.proc.wait(timeout=max(remaining, 0.0))
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        if self.seconds is None:
            self.seconds = time.monotonic() - self.started
        out = self.stdout.read_text(encoding="utf-8", errors="replace")
        err = self.stderr.read_text(encoding="utf-8", errors="replace")
        return subprocess.CompletedProcess(self.argv, code, out, err)

    def stop(self) -> None:
        """Stop the check's whole process group (a no-op once it has exited)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


_JOBS: dict[str, Job] = {}


def start(key: str, argv: Sequence[str], cwd: Path, drop_env: Iterable[str], folder: Callable[[], Path]) -> Job:
    """Start `argv` for the test `key` (once): output to files in `folder()`, in a new process group, niced."""
    if key in _JOBS:
        return _JOBS[key]
    out = folder()
    env = {k: v for k, v in os.environ.items() if k not in set(drop_env)}
    stdout, stderr = out / "stdout.txt", out / "stderr.txt"
    nice = shutil.which("nice")
    lowered = [nice, "-n", str(NICENESS)] if nice else []
    with open(stdout, "wb") as o, open(stderr, "wb") as e:
        proc = subprocess.Popen([*lowered, *argv], cwd=cwd, env=env, stdout=o, stderr=e, start_new_session=True)
    _JOBS[key] = Job(list(argv), cwd, proc, stdout, stderr)
    return _JOBS[key]


def stop_all() -> None:
    """Stop every check still running (the session ends early, or its test was never reached)."""
    for job in _JOBS.values():
        job.stop()


def times() -> dict[str, float]:
    """Each finished check's wall seconds by test id, for the session's time report."""
    return {key: job.seconds for key, job in _JOBS.items() if job.seconds is not None}
