"""The page that lists what a new built-in server-backed store touches names files that exist, and a store module
registers by its file alone (no list elsewhere to edit)."""

from __future__ import annotations

import re

from repo_paths import ROOT, SRC
from retbench.retrievers.base import _store_modules

PAGE = ROOT / "docs" / "contributing" / "server-store.md"


def test_every_file_the_store_page_names_exists():
    named = set(
        re.findall(r"`((?:src|tests|docs|configs|scripts|benchmarks)/[\w/.\-]+\.(?:py|md|yaml|sh))`", PAGE.read_text())
    )
    named |= {"pyproject.toml"} if "`pyproject.toml`" in PAGE.read_text() else set()
    assert len(named) >= 12
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []


def test_every_module_of_the_stores_folder_is_imported_when_adapters_are_looked_up():
    files = sorted(
        p.stem for p in (SRC / "retbench" / "retrievers" / "stores").glob("*.py") if not p.stem.startswith("_")
    )
    assert _store_modules() == [f"stores.{f}" for f in files]
