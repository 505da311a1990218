"""The package's import graph is layered and acyclic, lazy imports included.

The graph is read from the source (AST), not by importing: every `import retbench...` at module level
*and inside functions* is an edge (a function-level import is only a deferred one: if promoting it to the
top of its file would close a cycle or reach up a layer, it exists to dodge that and is refused here).
Imports under `if TYPE_CHECKING:` are skipped by the layer and run-time cycle checks (they never run); the
circle checks at the end count them too: an annotation that names a module is a dependency a reader follows,
and a circle through one means the two modules cannot be understood (or moved) apart.

The layers, lowest first. A module may import from its own layer or lower ones, never higher; peers in one
layer may import each other as long as no cycle forms.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

from repo_paths import SRC

LAYERS: list[tuple[str, ...]] = [
    ("errors", "secrets", "loopback", "jsontypes"),
    ("data", "stats", "power", "active", "sequential", "values"),
    ("chunkers",),
    ("metrics",),
    ("io",),
    ("estimates",),
    ("evaluation",),
    ("config",),
    ("retrievers", "llm"),
    ("results",),
    (
        "inputs",
        "alignment",  # two systems on the same query rows: what comparison, gates and planning start from
        "comparison",
        "anytime",
        "criteria",
        "gates",
        "planning",
        "tuning",
        "resolution",
        "movement",
        "leaderboard",  # ranks over datasets and their order
        "pareto",  # the fronts the trade-off charts and the cost table name
    ),
    ("report",),  # renders what studies computed; studies ask it to render, it never imports a study
    ("studies",),
    ("api", "testing", "services", "services_state"),
    ("cli", "serve", "labelapp"),  # labelapp: the labelling page, an ASGI app beside `serve`
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in (SRC / "retbench").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module a dotted name lives in (a module, or the package whose attribute it is)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(module: str, packages: bool = True, typing: bool = False) -> Iterator[tuple[str, int, bool]]:
    """(imported retbench module, line, at module level?) for every import that can run.

    `packages`: `from a.b import c` also counts a.b, which Python runs first (a package's `__init__`); off,
    only c is counted when it is a module (what the import is for). `typing`: imports under
    `if TYPE_CHECKING:` count too (at the level of the `if`).
    """
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(node: ast.AST, top: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not typing:
                for other in child.orelse:
                    yield from walk(other, top)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if (owner := _owner(alias.name)) is not None:
                        yield owner, child.lineno, top
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - child.level + 1] + ([base] if base else []))
                # `from a.b import c` runs a.b (a package's __init__ too) and, when c is a module, a.b.c
                named = [f"{base}.{a.name}" for a in child.names if f"{base}.{a.name}" in MODULES]
                if (packages or len(named) < len(child.names)) and (owner := _owner(base)) is not None:
                    yield owner, child.lineno, top
                for full in named:
                    yield full, child.lineno, top
            else:
                inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                yield from walk(child, inner)

    yield from walk(ast.parse(path.read_text(encoding="utf-8")), True)


GRAPH: dict[str, set[str]] = {m: {d for d, _, _ in _imports(m) if d != m} for m in MODULES}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return RANK.get(parts[1]) if len(parts) > 1 else None


def test_every_top_level_module_and_package_has_a_layer():
    tops = {m.split(".")[1] for m in MODULES if m.count(".") >= 1}
    assert sorted(tops - set(RANK)) == []


def test_no_module_imports_from_a_higher_layer():
    upward = [
        f"{MODULES[m].relative_to(SRC)}:{line}: {m} imports {dep}"
        for m in sorted(MODULES)
        for dep, line, _ in _imports(m)
        if dep != m and (lm := _layer(m)) is not None and (ld := _layer(dep)) is not None and ld > lm
    ]
    assert upward == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(old)
    return found


def test_the_import_graph_has_no_cycle_even_counting_function_level_imports():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_function_level_import_repeats_a_module_level_one():
    again = []
    for module in sorted(MODULES):
        found = list(_imports(module, packages=False))
        top = {dep for dep, _, at_top in found if at_top}
        again += [
            f"{MODULES[module].relative_to(SRC)}:{line}: {dep}"
            for dep, line, at_top in found
            if not at_top and dep in top
        ]
    assert again == []


# -- circles, typing-only imports included ------------------------------------------------------------------
TYPED_GRAPH: dict[str, set[str]] = {m: {d for d, _, _ in _imports(m, typing=True) if d != m} for m in MODULES}


def _top(module: str) -> str:
    """The top-level package or module of src/retbench a module belongs to ("report", "studies", "api")."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed onto top-level packages (an edge wherever one module of a imports one of b)."""
    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        for dep in deps:
            if _top(module) != _top(dep):
                out.setdefault(_top(module), set()).add(_top(dep))
    return out


def test_report_imports_no_study_not_even_for_annotations():
    """report/ renders what a study returns (results/): it never names a study's module, typing-only included."""
    found = [
        f"{MODULES[m].relative_to(SRC)}:{line}: {dep}"
        for m in sorted(MODULES)
        if _top(m) == "report"
        for dep, line, _ in _imports(m, typing=True)
        if _top(dep) == "studies"
    ]
    assert found == []


def test_no_circle_between_top_level_packages_even_counting_typing_only_imports():
    """report <-> studies included: a circle between packages means neither can be read, tested or moved alone."""
    assert _cycles(_package_graph(TYPED_GRAPH)) == []


#: module circles still in the graph (typing-only imports included), each to be broken and removed from here;
#: a new or larger circle fails the test below. data.run <-> data.locate: the run's lookups and the run.
KNOWN_CIRCLES: list[list[str]] = []


def test_no_new_circle_appears_when_typing_only_imports_count():
    """A circle may shrink or go (then shorten the list above); one that grows or is new fails."""
    assert [c for c in _cycles(TYPED_GRAPH) if not any(set(c) <= set(k) for k in KNOWN_CIRCLES)] == []
