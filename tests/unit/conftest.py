"""Keeps the unit tier honest: a run of unit tests alone must not have loaded any optional extra.

The unit tier promises core dependencies only (SciPy and jsonschema are development dependencies and
allowed). A new unit test that pulls in a model, a store client or a peer oracle fails the session here,
naming the module, so it moves to tests/integration or tests/parity instead of slowing every quick run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HEAVY = [
    "torch",
    "sentence_transformers",
    "faiss",
    "transformers",
    "tokenizers",
    "onnxruntime",
    "wordllama",
    "ray",
    "mlflow",
    "langchain_core",
    "llama_index",
    "datasets",
    "pandas",
    "chromadb",
    "qdrant_client",
    "lancedb",
    "pymilvus",
    "psycopg",
    "sacrebleu",
    "rouge_score",
    "pytrec_eval",
    "ranx",
    "ppi_py",
    "cryptography",
]
UNIT = Path(__file__).resolve().parent


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    items = getattr(session, "items", [])
    if not items or any(UNIT not in Path(str(item.path)).resolve().parents for item in items):
        return  # other tiers ran in this session too: they may load anything
    loaded = sorted(name for name in HEAVY if name in sys.modules)
    if loaded:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"unit tier loaded optional libraries: {', '.join(loaded)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
