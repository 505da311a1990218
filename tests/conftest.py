"""Shared test setup for every tier: no model hub, no writes outside temporary folders, per-tier times."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

import background
from repo_paths import SCIFACT, TESTS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Folders this session makes for itself at import time (the libraries read these variables when imported),
# removed when the session ends. A variable already set by the caller is the caller's and is left alone.
_SESSION_DIRS: list[str] = []
# The variables this session set to those folders: a background check's own pytest session makes its own.
_SESSION_ENV: list[str] = []


def _session_dir(prefix: str) -> str:
    path = tempfile.mkdtemp(prefix=prefix)
    _SESSION_DIRS.append(path)
    return path


# One Hugging Face datasets cache per test session: the shared per-user cache serves a local folder's
# earlier contents again when a later session writes different files at a path it has seen.
if "HF_DATASETS_CACHE" not in os.environ:
    _SESSION_ENV.append("HF_DATASETS_CACHE")
    os.environ["HF_DATASETS_CACHE"] = _session_dir("retbench-test-hf-datasets-")
# `retbench run` registers every run in a history database: keep the tests' runs out of the user's own
if "RETBENCH_HISTORY" not in os.environ:
    _SESSION_ENV.append("RETBENCH_HISTORY")
    os.environ["RETBENCH_HISTORY"] = str(Path(_session_dir("retbench-history-")) / "history.sqlite")
# Encoder, judge, generation and rerank caches default to ./.retbench-cache: a test that sets no cache
# folder would write into the working directory. Export RETBENCH_CACHE to keep a cache across sessions.
if "RETBENCH_CACHE" not in os.environ:
    _SESSION_ENV.append("RETBENCH_CACHE")
    os.environ["RETBENCH_CACHE"] = _session_dir("retbench-test-cache-")


# Hypothesis keeps its example database and caches in ./.hypothesis by default, a write into the working
# directory; a failure still prints the example and its @reproduce_failure line.
set_hypothesis_home_dir(_session_dir("retbench-test-hypothesis-"))


def pytest_unconfigure(config: pytest.Config) -> None:
    background.stop_all()
    for path in _SESSION_DIRS:
        shutil.rmtree(path, ignore_errors=True)


# --- time per tier: summed setup + call + teardown of the tests under tests/<tier>/, printed at the end
_TIERS = ("unit", "integration", "parity")
_tier_seconds: dict[str, float] = {}
_tier_tests: dict[str, set[str]] = {}


def _tier(nodeid: str, rootpath: Path) -> str | None:
    """unit, integration or parity from where the test file sits (node ids are relative to the rootdir)."""
    path = (rootpath / nodeid.split("::", 1)[0]).resolve()
    try:
        first = path.relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in _TIERS else None


_ROOTPATH: list[Path] = []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Each session gets a base temp folder of its own (removed at the end), unless --basetemp names one.

    pytest's default, /tmp/pytest-of-<user>/pytest-<N>, keeps only the last three sessions: on a machine
    where several pytest sessions run at once, a session that starts deletes an older one's folders while
    its tests still use them (tmp_path gone, the working directory gone under a test that changed into it).
    """
    if config.option.basetemp is None:
        config.option.basetemp = _session_dir("retbench-pytest-")
    _ROOTPATH.append(config.rootpath)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = _tier(report.nodeid, _ROOTPATH[0]) if _ROOTPATH else None
    if tier is None:
        return
    _tier_seconds[tier] = _tier_seconds.get(tier, 0.0) + report.duration
    _tier_tests.setdefault(tier, set()).add(report.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not _tier_tests:
        return
    parts = [
        f"{tier} {_tier_seconds[tier]:.1f} s ({len(_tier_tests[tier])} tests)" for tier in _TIERS if tier in _tier_tests
    ]
    terminalreporter.write_line("tier times: " + ", ".join(parts))
    checks = background.times()
    if checks:  # their tests' own times above count only the wait for what was left
        terminalreporter.write_line(
            "background checks (started after collection, beside the tests): "
            + ", ".join(f"{key} {seconds:.1f} s" for key, seconds in checks.items())
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the subprocess check of every selected test marked `background` (tests/support/background.py)."""
    if session.config.option.collectonly:
        return
    for item in session.items:
        if item.get_closest_marker("background") is not None:
            _start_background(item)


def _start_background(item: pytest.Item) -> background.Job:
    mark = item.get_closest_marker("background")
    assert mark is not None, f"{item.nodeid} has no background mark"
    folder = lambda: Path(_session_dir("retbench-background-"))  # noqa: E731 - made only when the check starts
    return background.start(item.nodeid, mark.args[0], mark.kwargs["cwd"], _SESSION_ENV, folder)


@pytest.fixture
def background_result(request: pytest.FixtureRequest):
    """The finished process of this test's `background` check (started after collection; here if it was not),
    as `subprocess.run(argv, cwd=..., capture_output=True, text=True, timeout=...)` returns it."""
    mark = request.node.get_closest_marker("background")
    assert mark is not None, "background_result needs @pytest.mark.background(argv, cwd=...)"
    return _start_background(request.node).wait(timeout=mark.kwargs.get("timeout", 900))


@pytest.fixture(scope="session")
def scifact_path() -> Path:
    return SCIFACT


@pytest.fixture(scope="session")
def scifact(scifact_path: Path):
    from retbench.io.beir import read_beir

    return read_beir(scifact_path)


@pytest.fixture(autouse=True)
def _metric_registry_restored():
    """Each test sees the metric registry as the session first built it and leaves it so.

    Loading a config with `rubrics:` declares each rubric as a metric, and some tests register or remove
    rows on purpose; without this, a later test (the generated metric reference, the catalog) sees rows
    that belong to another test, and the outcome depends on test order.
    """
    from retbench.metrics import catalog

    catalog._load_plugins()
    saved = (dict(catalog._REGISTRY), dict(catalog._LOOKUP), dict(catalog._PLUGIN_ERRORS))
    yield
    for live, kept in zip((catalog._REGISTRY, catalog._LOOKUP, catalog._PLUGIN_ERRORS), saved, strict=True):
        live.clear()
        live.update(kept)
    catalog._FAMILIES.clear()
