"""Where the repository's files are, from this file's own place, so no test depends on the working directory.

Test modules sit at different depths under tests/{unit,integration,parity}/, so `Path(__file__)` arithmetic
in each of them would break whenever a file moves; every path a test needs is named here once.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
TESTS = ROOT / "tests"
SUPPORT = TESTS / "support"
# plugins/ is data, deliberately not on sys.path: tests put it there themselves when they load a plugin
PLUGINS = TESTS / "plugins"
METRIC_PLUGIN = PLUGINS / "metric_plugin"
PROMPTS = TESTS / "llm_prompts"
# a results folder written by the layout before schema_version 2 (means and blocks in one object)
V1_RESULTS = TESTS / "fixtures" / "results_v1"
CORPORA = ROOT / "corpora"
SCIFACT = CORPORA / "scifact"
CONFIGS = ROOT / "configs"
EXAMPLES = ROOT / "examples"
