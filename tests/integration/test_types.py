"""src/ type-checks: mypy (configured in pyproject.toml) runs as part of the test command."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from repo_paths import ROOT

# cwd=ROOT for pyproject's relative `files`; --cache-dir=/dev/null (mypy's documented way to write no cache) keeps
# ROOT/.mypy_cache unwritten (no test writes outside a temporary folder); every module is checked from scratch
MYPY = [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", "/dev/null"]


@pytest.mark.background(MYPY, cwd=ROOT)
def test_mypy_reports_no_type_errors_in_src(background_result) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is in the dev extra installed by scripts/setup.sh")
    assert background_result.returncode == 0, background_result.stdout[-6000:] + background_result.stderr[-2000:]
