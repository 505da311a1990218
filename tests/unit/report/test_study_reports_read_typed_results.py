"""The stress, document-values and calibration reports take the typed results of `retbench.results`, not JSON.

A renderer that takes `Mapping[str, Any]` reads keys nobody declared: a renamed field in the study breaks the
report at run time, and only for the runs that reach that branch. Each renderer here names its typed input.
"""

from __future__ import annotations

import ast

import pytest

from repo_paths import SRC

REPORTS = SRC / "retbench" / "report"
#: module -> the functions whose every parameter must be typed (None: every function of the module)
RENDERERS: dict[str, set[str] | None] = {
    "stress.py": None,
    "stress_stream.py": None,
    "values.py": None,
    "judge.py": {"calibration_lines", "rubric_calibration_lines"},
}


def _untyped_parameters(module: str, only: set[str] | None) -> list[str]:
    tree = ast.parse((REPORTS / module).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and (only is None or node.name in only):
            for arg in [*node.args.args, *node.args.kwonlyargs]:
                text = ast.unparse(arg.annotation) if arg.annotation is not None else "(none)"
                if "Any" in text or text in ("(none)", "Mapping[str, object]", "dict[str, object]"):
                    found.append(f"{module}:{node.lineno} {node.name}({arg.arg}: {text})")
    return found


@pytest.mark.parametrize("module", sorted(RENDERERS))
def test_each_study_renderer_takes_a_typed_result_not_a_json_mapping(module: str) -> None:
    assert _untyped_parameters(module, RENDERERS[module]) == []


def test_the_renderers_named_here_exist() -> None:
    """The check above cannot pass by naming functions that are gone."""
    tree = ast.parse((REPORTS / "judge.py").read_text())
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert {"calibration_lines", "rubric_calibration_lines"} <= names
