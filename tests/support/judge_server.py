"""A real OpenAI-compatible judge server for the tests that need an LLM behind the judge's HTTP API.

`transformers serve` (Hugging Face transformers' own server, `pip install transformers[serving]`) runs the same
0.5B GGUF that tinyq4 serves, dequantized into PyTorch: on this project's 2-core CI machine a short verdict
takes about 4 s there against about 28 s in tinyq4, which decodes the prompt one token at a time. The model
loads once per test session: from the float32 folder scripts/unpack_gguf.py made of the GGUF (about 10 s), or
from the GGUF itself, dequantized at every start (over a minute). Tests of `judge: local:` itself (which starts
tinyq4) keep tinyq4 on the GGUF."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from retbench.errors import BackendError
from retbench.llm.local import wait_healthy
from retbench.loopback import LOOPBACK, free_port, listening_addresses


def transformers_cli() -> str | None:
    """The venv's `transformers` command, if transformers' serving extra can run here."""
    try:
        import accelerate  # noqa: F401 - transformers needs it to load GGUF weights
        import fastapi  # noqa: F401
        import gguf  # noqa: F401
    except ImportError:
        return None
    here = Path(sys.executable).parent / "transformers"
    return str(here) if here.is_file() else shutil.which("transformers")


@contextmanager
def transformers_server(model: Path, log: Path, start_timeout: float = 900.0) -> Iterator[str]:
    """Serve `model` (a GGUF file or a model folder) with `transformers serve` on a loopback port; yields the base
    URL; always stops it (the server runs its model in a child process, so the whole process group is stopped)."""
    cli = transformers_cli()
    assert cli is not None, "transformers serve needs the judge extra (accelerate, gguf, fastapi)"
    port = free_port()
    spec = str(model) if model.is_dir() else f"{model.parent}:{model.name}"  # GGUF weights: <folder>:<file>
    cmd = [cli, "serve", spec, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--device", "cpu", "--dtype", "float32"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with open(log, "ab") as sink:
        proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=sink, start_new_session=True)
        try:
            try:
                wait_healthy(proc, port, start_timeout, "transformers serve")
            except BackendError as exc:  # the server's own log says why
                raise RuntimeError(f"{exc}:\n{log.read_text()[-3000:]}") from None
            assert listening_addresses(port) <= LOOPBACK, f"transformers serve listens beyond loopback on {port}"
            yield f"http://127.0.0.1:{port}"
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group, then SIGKILL whatever of it is left; waits for the server."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the engine child, if it outlived the server
    proc.wait()
