"""A misspelt value the schema knows gets the nearest valid one suggested, as a misspelt key does."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from retbench.cli import app

CONFIG = """\
name: spelled
output: {out}
metrics: [ndcg@10]
datasets: [{{name: scifact, split: test, max_queries: 3, corpus_sample: 50}}]
{extra}systems:
  - {{name: one, adapter: {adapter}}}
"""


@pytest.mark.parametrize(
    ("adapter", "extra", "field", "needle"),
    [
        ("rank-bm25", "", "systems[0].adapter", "unknown adapter 'rank-bm25'; available: bm25s,"),
        ("BM25S", "", "systems[0].adapter", "unknown adapter 'BM25S'; available: bm25s,"),
        ("bm25s", "executor: inprocess\n", "executor.kind", "must be one of 'in_process' or 'ray', got 'inprocess'"),
    ],
)
def test_a_misspelt_value_is_one_line_naming_the_field_and_the_value_meant(
    tmp_path: Path, adapter: str, extra: str, field: str, needle: str
) -> None:
    path = tmp_path / "spelled.yaml"
    path.write_text(CONFIG.format(out=tmp_path / "out", extra=extra, adapter=adapter))
    res = CliRunner().invoke(app, ["run", str(path)])
    out = res.output.strip()
    assert res.exit_code == 2, out
    assert len(out.splitlines()) == 1 and f"field '{field}': " in out and needle in out, out
    meant = {"rank-bm25": "rank_bm25", "BM25S": "bm25s"}.get(adapter, "in_process")
    assert out.endswith(f"; did you mean '{meant}'?"), out
    assert not (tmp_path / "out").exists()


def test_a_value_nothing_like_any_choice_gets_no_guess(tmp_path: Path) -> None:
    path = tmp_path / "spelled.yaml"
    path.write_text(CONFIG.format(out=tmp_path / "out", extra="", adapter="zzzzqqq"))
    res = CliRunner().invoke(app, ["run", str(path)])
    assert res.exit_code == 2 and "unknown adapter 'zzzzqqq'" in res.output and "did you mean" not in res.output


@pytest.mark.parametrize(("value", "meant"), [("rrff", "rrf"), ("comb-mnz", "combmnz"), ("MinMax", "minmax")])
def test_a_literal_value_in_any_config_block_is_suggested(value: str, meant: str):
    from retbench.config.base import validate
    from retbench.config.experiment import RerankFuseBlock
    from retbench.errors import ConfigError

    key = "normalization" if meant == "minmax" else "fusion"
    with pytest.raises(ConfigError) as err:
        validate(RerankFuseBlock, {key: value}, "<test>")
    assert f"field '{key}': must be one of " in str(err.value)
    assert str(err.value).endswith(f"got '{value}'; did you mean '{meant}'?")


@pytest.mark.parametrize(("written", "quoted"), [("on", "on"), ("off", "off"), ("yes", "on")])
def test_an_unquoted_yaml_boolean_where_a_word_is_expected_says_to_quote_it(
    tmp_path: Path, written: str, quoted: str
) -> None:
    path = tmp_path / "spelled.yaml"
    text = CONFIG.format(out=tmp_path / "out", extra="", adapter="bm25s")
    path.write_text(
        text.replace("adapter: bm25s}", f'adapter: bm25s, scope: {{selector: "m:f", folder_mode: {written}}}}}')
    )
    res = CliRunner().invoke(app, ["run", str(path)])
    out = res.output.strip()
    assert res.exit_code == 2, out
    assert f"{path}:6: field 'systems[0].scope.folder_mode': must be one of" in out, out
    assert out.endswith(f"YAML reads unquoted on/off/yes/no as true/false: quote it ('{quoted}')"), out
