"""src/ type-checks: mypy (configured in pyproject.toml) runs as part of the test command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from repo_paths import ROOT


def test_mypy_reports_no_type_errors_in_src(tmp_path) -> None:
    pytest.importorskip("mypy", reason="mypy is in the dev extra installed by scripts/setup.sh")
    # the cache goes to tmp_path, not ROOT/.mypy_cache (no test writes outside a temporary folder); cwd=ROOT for
    # pyproject's relative `files`
    mypy = [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", str(tmp_path / "mypy-cache")]
    proc = subprocess.run(mypy, cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
