"""What the workbench reads from a plugin is declared, never probed: a metric's optional declarations are the fields
of `metrics.base.MetricRow` (read through `row_of`), a retriever's are attributes of `retrievers.base.Retriever`
with their defaults. No module reads one of those names with `getattr(obj, "name", default)` or `hasattr`, so a
plugin author finds every one of them on those two classes (and on the plugin page), with its type and default.
"""

from __future__ import annotations

import ast
from dataclasses import fields

from repo_paths import SRC
from retbench.metrics.base import MetricRow
from retbench.retrievers.base import AsyncSearch, Retriever

#: what a retriever may declare beside index / search_batch / search_one
RETRIEVER_DECLARED = ("inner", "components", "encoder", "answers", "scopes", "index_type", "parts", "capabilities")
#: (module file, object read): reads of a same-named attribute of something that is not a plugin (a golden sample)
NOT_A_PLUGIN = {("metrics/answers.py", "sample"), ("metrics/judged.py", "sample")}
#: (module file, attribute): probes in modules whose owners move them next (stress: `isinstance(r, AsyncSearch)`)
NOT_YET_MOVED = {("studies/stress/drivers.py", "asearch_one")}


def _probes() -> list[tuple[str, int, str, str]]:
    declared = {f.name for f in fields(MetricRow)} | set(RETRIEVER_DECLARED) | {"asearch_one"}
    found = []
    for path in sorted((SRC / "retbench").rglob("*.py")):
        rel = path.relative_to(SRC / "retbench").as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id not in ("getattr", "hasattr") or len(node.args) < 2:
                continue
            attr = node.args[1]
            if isinstance(attr, ast.Constant) and attr.value in declared:
                obj = ast.unparse(node.args[0])
                if (rel, obj) not in NOT_A_PLUGIN and (rel, attr.value) not in NOT_YET_MOVED:
                    found.append((rel, node.lineno, obj, attr.value))
    return found


def test_no_module_probes_a_plugin_for_an_attribute_its_declaration_lists():
    assert _probes() == [], "\n".join(f"{f}:{line}: getattr/hasattr({o}, {a!r})" for f, line, o, a in _probes())


def test_a_retriever_that_declares_nothing_reads_as_a_plain_ranker():
    class Plain(Retriever):
        def index(self, corpus: object) -> None:
            pass

        def search_batch(self, texts, k):
            return [[] for _ in texts]

    r = Plain()
    assert (r.inner, tuple(r.components), r.encoder, r.answers, r.scopes, r.index_type) == (
        None,
        (),
        None,
        None,
        None,
        None,
    )
    assert r.capabilities == frozenset() and not isinstance(r, AsyncSearch)
