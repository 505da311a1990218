"""One home per name: a shared name is defined once and every module imports it from there.

A second path to the same object (a module that imports a name and passes it on) lets two callers read one
thing under two addresses, and the next person edits the copy that is not used; a second signature of one
method lets an implementation drift from the protocol the caller was written against.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from retbench.studies.cell_contract import Executor
from retbench.studies.executors import InProcess, RayExecutor

SRC = Path(__file__).resolve().parents[2] / "src"

#: modules that own names shared across the package: io.files the one writer, metrics.settings the evaluation
#: settings, metrics.coverage what a table covers, studies.cell_contract what a cell is given, studies.outcome
#: what a study returns, config.experiment the fusion vocabulary, metrics.catalog the registered metrics, stats.paired
#: and stats.ppi the statistics (the `retbench.stats` package gathers their public names), services_state what
#: `services up` records, retrievers.fusion_options the fusion names and their checks
HOMES = (
    "retbench.io.files",
    "retbench.metrics.settings",
    "retbench.metrics.coverage",
    "retbench.studies.cell_contract",
    "retbench.studies.outcome",
    "retbench.config.experiment",
    "retbench.metrics.catalog",
    "retbench.stats.paired",
    "retbench.stats.ppi",
    "retbench.services_state",
    "retbench.retrievers.fusion_options",
)
#: (importing module, name, module it is imported from): imports in modules whose owners move them next
NOT_YET_MOVED: set[tuple[str, str, str]] = set()


def _module_file(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _defined(module: str) -> set[str]:
    """Names a module binds at its top level itself (functions, classes, assignments), not by importing."""
    path = _module_file(module)
    assert path is not None, module
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _second_hand_imports() -> list[tuple[str, str, str, str]]:
    """(importing module, name, module it came through, its home) for every import of a home's name that does
    not come from the home."""
    homes_of: dict[str, set[str]] = {}
    for home in HOMES:
        for name in _defined(home):
            homes_of.setdefault(name, set()).add(home)
    found = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        importer = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            if not node.module.startswith("retbench.") or _module_file(node.module) is None:
                continue
            for alias in node.names:
                homes = homes_of.get(alias.name, set())
                if not homes or node.module in homes or alias.name in _defined(node.module):
                    continue
                package = _module_file(node.module).name == "__init__.py"
                if package and any(h.startswith(node.module + ".") for h in homes):
                    continue  # a package's public names, gathered from its own modules
                found.append((importer, alias.name, node.module, " or ".join(sorted(homes))))
    return found


def test_every_shared_name_is_imported_from_its_home():
    stray = [f for f in _second_hand_imports() if f[:3] not in NOT_YET_MOVED]
    assert stray == [], "\n".join(f"{m} imports {n} from {via}, not from {home}" for m, n, via, home in stray)


def test_the_names_not_yet_moved_are_still_imported_that_way():
    """Once a listed import has moved to the home, its entry goes too (the list only shrinks)."""
    assert {f[:3] for f in _second_hand_imports()} >= NOT_YET_MOVED


@pytest.mark.parametrize("executor", [InProcess, RayExecutor])
@pytest.mark.parametrize("method", ["encode_corpus", "search", "close"])
def test_each_executor_has_the_protocols_signature(executor, method):
    assert inspect.signature(getattr(executor, method)) == inspect.signature(getattr(Executor, method))
