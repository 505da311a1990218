"""Where the 0.5B judge model that scripts/setup.sh assembles lives, for the tests that use it."""

from __future__ import annotations

from pathlib import Path

from repo_paths import ROOT

LOCAL_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def local_model_file() -> Path | None:
    """The 0.5B GGUF that scripts/setup.sh assembles, if it is there."""
    from retbench.llm.local import cache_root

    for base in (cache_root(), ROOT / ".retbench-cache"):
        if (base / "models" / LOCAL_MODEL).is_file():
            return (base / "models" / LOCAL_MODEL).resolve()
    return None
