"""`import retbench` shows its public names and nothing else."""

from __future__ import annotations

import pytest


def test_dir_of_retbench_is_its_public_api_and_every_name_resolves():
    import retbench

    names = dir(retbench)
    assert names == sorted(retbench.__all__)
    assert not {"Any", "annotations", "import_module", "importlib"} & set(names)
    assert all(not n.startswith("_") or n == "__version__" for n in names)
    for name in names:
        assert getattr(retbench, name) is not None


def test_a_name_outside_the_api_is_an_attribute_error_naming_it():
    import retbench

    with pytest.raises(AttributeError, match="'nosuch'"):
        retbench.nosuch  # noqa: B018
