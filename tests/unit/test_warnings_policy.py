"""The suite's warning policy (pyproject.toml, [tool.pytest.ini_options] filterwarnings): a warning attributed
to retbench's own code fails the test that raised it; one attributed to another package is reported as usual."""

from __future__ import annotations

import warnings

import pytest


def _warn_from(module: str) -> None:
    warnings.warn_explicit("a retbench test warning", UserWarning, f"{module.replace('.', '/')}.py", 1, module=module)


@pytest.mark.parametrize("module", ["retbench", "retbench.evaluation.scoring"])
def test_a_warning_from_a_retbench_module_is_an_error(module):
    with pytest.raises(UserWarning, match="a retbench test warning"):
        _warn_from(module)


@pytest.mark.parametrize("module", ["retbench_plugin", "numpy.core"])
def test_a_warning_from_another_package_is_recorded_not_raised(module):
    with warnings.catch_warnings(record=True) as seen:  # records under the suite's filters, which stay in place
        _warn_from(module)
    assert [str(w.message) for w in seen] == ["a retbench test warning"]
