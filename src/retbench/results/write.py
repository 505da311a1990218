"""The one writer of a study's results: metrics.json and manifest.json from a `StudyResult`.

Both files carry `schema_version` (`results.model.SCHEMA_VERSION`) so the reader knows their layout;
each is written atomically, strict JSON, redacted (`io.files.write_json`).
"""

from __future__ import annotations

from pathlib import Path

from retbench.io.files import write_json
from retbench.results.model import StudyResult


def write_results(out: Path, result: StudyResult) -> None:
    """metrics.json (every system's values and blocks) and manifest.json beside them."""
    write_json(out / "metrics.json", result.to_dict())
    write_json(out / "manifest.json", result.manifest.to_dict())
