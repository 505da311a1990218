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


_NUMBA_CAST = "\x1b[1munsafe cast from uint64 to int64. Precision may be lost.\x1b[0m"  # as numba colours it


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("/venv/lib/python3.11/site-packages/ranx/normalization/borda_norm.py", False),
        ("C:\\venv\\Lib\\site-packages\\ranx\\normalization\\borda_norm.py", False),
        ("/venv/lib/python3.11/site-packages/ranx/normalization/max_norm.py", True),
    ],
)
def test_a_third_party_warning_given_by_file_is_filtered_by_the_modules_path(path, shown):
    """Numba warns at compile time with the source file and no module name (so Python matches the filter's
    module field against the path without `.py`): the ranx line names the path; the cast elsewhere still shows."""
    with warnings.catch_warnings(record=True) as seen:  # records under the suite's filters, which stay in place
        warnings.warn_explicit(_NUMBA_CAST, UserWarning, path, 53)
    assert [str(w.message) for w in seen] == ([_NUMBA_CAST] if shown else [])
