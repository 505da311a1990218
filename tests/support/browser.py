"""Headless Chromium for the report tests: the page's DOM after its inline scripts ran, offline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)


def dump_dom(page: Path, fragment: str, profile: Path) -> str:
    """The DOM of `page` opened at `fragment` (`#q=...`), with a profile of its own under the test's folder."""
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
           f"--user-data-dir={profile}", "--dump-dom", page.as_uri() + fragment]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
