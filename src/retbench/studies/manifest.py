"""What every manifest records first: what ran (the config as written and as validated), when, with which
package versions, where.

`manifest_header` is the one place that header is built; each study adds its own blocks after it
(datasets, systems, the judge, ...).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

from retbench.config.study import Study

TRACKED_PACKAGES = (
    "retbench",
    "numpy",
    "bm25s",
    "rank-bm25",
    "PyStemmer",
    "sentence-transformers",
    "transformers",
    "torch",
    "faiss-cpu",
    "scipy",
    "datasets",
)


def config_record(cfg: Study) -> dict[str, object]:
    """What ran: the config file as its author wrote it (text and sha256), and the validated model (`resolved`:
    every default filled in, every path resolved, URLs without their credentials).

    The text is what a person reads and diffs (a parsed object would repeat every YAML alias expansion);
    `resolved` is what the study ran on. A config given in Python has no file: its text is the canonical
    JSON of the resolved model.
    """
    source = cfg.source
    resolved = cfg.resolved()
    p = Path(source)
    try:
        text = p.read_text(encoding="utf-8") if source and p.is_file() else None
    except (OSError, UnicodeDecodeError):
        text = None
    if text is None:
        text = json.dumps(resolved, sort_keys=True)
    return {
        "file": source,
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "text": text,
        "resolved": resolved,
    }


def manifest_header(cfg: Study, *, name: str | None = None, kind: str | None = None) -> dict[str, object]:
    """The header every manifest.json starts with: experiment name and kind (when the study has them), the
    config (`config_record`), its file, the creation time, package versions and the machine."""
    head: dict[str, object] = {}
    if name is not None:
        head["experiment"] = name
    if kind is not None:
        head["kind"] = kind
    head.update(
        config=config_record(cfg),
        config_file=cfg.source,
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        versions=package_versions(),
        machine=machine(),
    )
    return head


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def machine() -> dict[str, object]:
    info: dict[str, object] = {
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    try:
        with open("/proc/meminfo") as fh:
            info["memory_gib"] = round(int(fh.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    return info
