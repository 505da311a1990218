"""Config YAML that PyYAML takes silently or crashes on is refused at its line, with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from retbench.cli import app
from retbench.criteria import load_criteria
from retbench.errors import ConfigError
from retbench.studies.benchmark import load_config

runner = CliRunner()


def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("name: first\nmetrics: [ndcg@10]\n# the same key again\nname: second\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}:4: ")
    assert "key 'name' is written twice (lines 1 and 4)" in str(err.value)


def test_a_nested_duplicate_is_refused_and_a_merge_override_is_not(tmp_path: Path) -> None:
    path = tmp_path / "crit.yaml"
    path.write_text("criteria:\n  - metric: ndcg@10\n    min: 0.1\n    min: 0.2\n")
    with pytest.raises(ConfigError, match=r"crit.yaml:4: .*'min' is written twice \(lines 3 and 4\)"):
        load_criteria(path)
    from retbench.config import read_config

    ok = tmp_path / "merge.yaml"
    ok.write_text("base: &b {k1: 1.2, b: 0.75}\nsys:\n  <<: *b\n  b: 0.5\n")
    assert read_config(ok)[0]["sys"] == {"k1": 1.2, "b": 0.5}


def test_a_five_thousand_digit_integer_is_one_line_naming_its_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("name: big\nmetrics: [ndcg@10]\nseed: " + "9" * 5000 + "\n")
    res = runner.invoke(app, ["run", str(path)])
    out = res.output.strip()
    assert res.exit_code == 2, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert f"{path}:3: " in out and "integer of 5,000 digits" in out


def test_a_duplicate_key_through_the_cli_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("name: a\nname: b\n")
    res = runner.invoke(app, ["stress", str(path)])
    assert res.exit_code == 2, res.output
    assert "lines 1 and 2" in res.output and "Traceback" not in res.output
