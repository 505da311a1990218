"""A local judge: tinyq4 (a prebuilt OpenAI-compatible GGUF server from PyPI) on 127.0.0.1 only.

tinyq4 always binds every interface (0.0.0.0). We start it with `loopback_bind.so` preloaded (built
from `scripts/loopback_bind.c` by `scripts/setup.sh`), which turns its wildcard bind into a loopback
bind, and then check the listening socket in /proc/net/tcp{,6}: a server listening anywhere but
loopback is stopped and refused. One thread by default (`RAYON_NUM_THREADS`): on a small shared
machine more threads collapse throughput.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from retbench.errors import BackendError, ConfigError
from retbench.loopback import LOOPBACK, free_port, listening_addresses, stop_process


def cache_root() -> Path:
    """Where heavy fixtures live: $RETBENCH_CACHE, else `.retbench-cache` in the working directory."""
    return Path(os.environ.get("RETBENCH_CACHE") or ".retbench-cache")


def preload_library() -> Path | None:
    """The loopback shim built by scripts/setup.sh, if present."""
    for base in (cache_root(), Path(__file__).resolve().parents[3] / ".retbench-cache"):
        path = base / "bin" / "loopback_bind.so"
        if path.is_file():
            return path
    return None


def server_binary() -> Path | None:
    found = shutil.which("tinyq4") or shutil.which("tinyq4", path=str(Path(sys.executable).parent))
    return Path(found) if found else None


@contextmanager
def local_server(
    model_file: str | Path, threads: int = 1, start_timeout: float = 300.0, log: Path | None = None
) -> Iterator[str]:
    """Run tinyq4 on `model_file` on a free loopback port; yields the base URL; always stops it."""
    model = Path(model_file)
    if not model.is_file():
        raise ConfigError(
            f"{model}: model file not found (scripts/setup.sh assembles it)", field="judge.local.model_file"
        )
    binary, shim = server_binary(), preload_library()
    if binary is None:
        raise BackendError("tinyq4 is not installed (pip install tinyq4==0.1.0; scripts/setup.sh does it)")
    if shim is None:
        raise BackendError("loopback_bind.so not found: run scripts/setup.sh (it builds the loopback shim for tinyq4)")
    port = free_port()
    env = {**os.environ, "LD_PRELOAD": str(shim.resolve()), "RAYON_NUM_THREADS": str(threads)}
    sink = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen([str(binary), str(model), "--server", str(port)], env=env, stdout=sink, stderr=sink)
    try:
        wait_healthy(proc, port, start_timeout)
        addresses = listening_addresses(port)
        if not addresses or addresses - LOOPBACK:
            raise BackendError(
                f"tinyq4 listens on {sorted(addresses) or 'nothing'} for port {port}, not loopback only: refused"
            )
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc, timeout=10)
        if log:
            sink.close()  # type: ignore[union-attr]


def wait_healthy(proc: subprocess.Popen, port: int, timeout: float, server: str = "tinyq4") -> None:
    """Poll the loopback server's `/health` until it answers 200; an exit or `timeout` seconds is a BackendError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BackendError(f"{server} exited with code {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise BackendError(f"{server} was not ready after {timeout:g} s")
