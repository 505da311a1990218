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
