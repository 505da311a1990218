"""The judge cache is keyed on what identifies the model: two real loopback servers that report the same model
id but answer differently never share verdicts; two that report the same model file sha256 do."""

from __future__ import annotations

from pathlib import Path

from obedient_llm import obedient_server
from retbench.llm.judge import Judge
from retbench.llm.settings import JudgeSettings

ITEMS = [(f"d{i}", {"query": "what lowers blood pressure?", "passage": f"passage {i}"}) for i in range(4)]
SHA = "ab" * 32


def _judge(server, cache: Path, **settings) -> Judge:
    block = {"base_url": f"http://127.0.0.1:{server.server_port}", "retries": 0, **settings}
    return Judge(JudgeSettings.from_config(block), cache_dir=cache)


def test_a_second_server_reporting_the_same_model_id_is_asked_not_served_the_first_ones_verdicts(tmp_path):
    with obedient_server("same-model", honest=lambda _: 3) as a, obedient_server("same-model", honest=lambda _: 0) as b:
        first = _judge(a, tmp_path)
        assert [v.value for v in first.judge(ITEMS)] == [3, 3, 3, 3]
        second = _judge(b, tmp_path)
        verdicts = second.judge(ITEMS)
        again = _judge(a, tmp_path)
        assert [v.value for v in again.judge(ITEMS)] == [3, 3, 3, 3] and again.stats.calls == 0  # its own cache
    assert [v.value for v in verdicts] == [0, 0, 0, 0] and not any(v.cached for v in verdicts)
    assert second.stats.calls == 4 and len(b.requests) == 4
    assert first.identity.key != second.identity.key
    url = f"http://127.0.0.1:{b.server_port}"
    assert second.identity.to_dict()["keyed_on"] == f"server {url} + model id 'same-model'"
    assert second.identity.to_dict()["server"] == url


def test_servers_that_report_the_same_model_file_sha256_share_its_verdicts(tmp_path):
    entry = {"digest": f"sha256:{SHA}"}  # Ollama's way of reporting the file
    with (
        obedient_server("m", honest=lambda _: 2, entry=entry) as a,
        obedient_server("m", honest=lambda _: 1, entry={"sha256": SHA.upper()}) as b,
    ):
        first = _judge(a, tmp_path)
        first.judge(ITEMS)
        second = _judge(b, tmp_path)
        verdicts = second.judge(ITEMS)
    assert [v.value for v in verdicts] == [2, 2, 2, 2] and all(v.cached for v in verdicts) and not b.requests
    assert second.identity.model_sha256 == SHA
    assert second.identity.keyed_on == f"model file sha256 {SHA[:12]} (reported by the server)"
