"""YAML configs: alias expansion is bounded everywhere retbench reads YAML, and manifests keep the config's text.

The "billion laughs" shape below is 418 bytes; expanded it is millions of nodes. Before the bound, a
config like it turned into a 17 MB manifest (and one level deeper, 843 MB of memory).
"""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml
from typer.testing import CliRunner

from retbench.cli import app
from retbench.errors import ConfigError
from retbench.io.files import load_yaml_text, read_yaml

LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
"""


def test_nested_aliases_past_the_limit_are_refused_before_they_expand(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    with pytest.raises(ConfigError, match=r"laughs.yaml: YAML aliases expand to [\d,]+ more nodes"):
        read_yaml(path)


def test_a_self_referencing_alias_is_refused():
    with pytest.raises(ConfigError, match="refers to itself"):
        load_yaml_text("a: &a [1, *a]\n", "loop.yaml")


def test_ordinary_anchors_that_share_settings_still_load():
    text = "enc: &enc {model: m, normalize: true}\nsystems:\n" + "".join(
        f"  - {{name: s{i}, params: *enc}}\n" for i in range(50)
    )
    assert load_yaml_text(text, "ok.yaml") == yaml.safe_load(text)


@pytest.mark.parametrize("command", ["run", "stress", "chunking", "ingest-impact"])
def test_every_config_command_refuses_the_expansion_with_one_line(tmp_path, command):
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    res = CliRunner().invoke(app, [command, str(path)])
    assert res.exit_code == 2, res.output
    assert "YAML aliases expand" in res.output and "Traceback" not in res.output


def test_gate_criteria_and_golden_files_are_bounded_too(tmp_path):
    crit = tmp_path / "crit.yaml"
    crit.write_text(LAUGHS)
    res = CliRunner().invoke(app, ["gate", "--criteria", str(crit), "--candidate", str(tmp_path)])
    assert res.exit_code == 2 and "YAML aliases expand" in res.output
    from retbench.io.outputs import read_outputs

    outputs = tmp_path / "outputs.yaml"
    outputs.write_text(LAUGHS)
    with pytest.raises(ConfigError, match="YAML aliases expand"):
        read_outputs(outputs)


def test_the_manifest_keeps_the_config_text_its_sha256_and_the_validated_config_that_ran(tmp_path):
    from retbench.studies.benchmark import load_config, run_experiment

    text = (
        "name: small\n"
        f"output: {tmp_path / 'out'}\n"
        "metrics: [ndcg_cut_10]\n"
        "datasets: [{name: scifact, split: test, max_queries: 5, corpus_sample: 200}]\n"
        "systems:\n"
        "  - {name: bm25, adapter: bm25s, params: &p {k1: 1.2, b: 0.75}}\n"
        "  - {name: bm25-again, adapter: bm25s, params: *p}\n"
    )
    cfg_path = tmp_path / "small.yaml"
    cfg_path.write_text(text)
    run_experiment(load_config(cfg_path), log=lambda m: None)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    resolved = manifest["config"].pop("resolved")
    assert manifest["config"] == {
        "file": str(cfg_path),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "text": text,
    }
    # what ran: every default filled in (depth, evaluation, executor), the metrics as written
    assert resolved["depth"] == 100 and resolved["evaluation"]["mode"] == "trec_eval"
    assert resolved["executor"]["kind"] == "in_process" and resolved["metrics"] == ["ndcg_cut_10"]
    assert [s["params"] for s in resolved["systems"]] == [{"k1": 1.2, "b": 0.75}] * 2
