"""Where the 0.5B judge model that scripts/setup.sh assembles lives, for the tests that use it."""

from __future__ import annotations

import json
from pathlib import Path

from repo_paths import ROOT

LOCAL_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
# scripts/unpack_gguf.py's float32 safetensors folder of the same model, beside the GGUF
UNPACKED = LOCAL_MODEL.removesuffix(".gguf") + ".float32"


def local_model_file() -> Path | None:
    """The 0.5B GGUF that scripts/setup.sh assembles, if it is there."""
    from retbench.llm.local import cache_root

    for base in (cache_root(), ROOT / ".retbench-cache"):
        if (base / "models" / LOCAL_MODEL).is_file():
            return (base / "models" / LOCAL_MODEL).resolve()
    return None


def servable_model(model_file: Path) -> Path:
    """What `transformers serve` should load for `model_file`: the unpacked float32 folder beside it when that
    folder was made from this very file (its recorded sha256), else the GGUF itself (the same tensors, loaded
    more slowly). Both give the same weights, so the judge's identity stays the GGUF's sha256."""
    folder = model_file.with_name(UNPACKED)
    try:
        recorded = json.loads((folder / "source.json").read_text())["sha256"]
    except (OSError, ValueError, KeyError):
        return model_file
    from retbench.llm.store import fingerprint_file

    return folder if recorded == fingerprint_file(model_file) else model_file
