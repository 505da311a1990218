"""src/ type-checks: mypy (configured in pyproject.toml) runs as part of the test command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_reports_no_type_errors_in_src() -> None:
    pytest.importorskip("mypy", reason="mypy is in the dev extra installed by scripts/setup.sh")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
