"""What every manifest records about where results were computed: package versions and the machine."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


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


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
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
