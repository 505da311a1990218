"""The document-values config: defaults a team can run as is, and refusals that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from retbench.config.study import parse_study
from retbench.config.values import ValuesModel
from retbench.errors import ConfigError


def test_an_empty_values_config_values_scifact_by_exact_recall_at_10_with_the_dense_default() -> None:
    model = parse_study({}, "values.yaml", ValuesModel)
    assert (model.utility, model.k, model.method) == ("recall", 10, "auto")
    assert model.retriever.adapter == "dense" and model.retriever.params["index"] == "flat_ip"
    assert model.dataset.spec == "scifact" and model.output_dir == Path("results") / "values"


def test_exact_values_of_ndcg_are_refused_naming_the_method() -> None:
    with pytest.raises(ConfigError, match="method") as exc:
        parse_study({"utility": "ndcg", "method": "exact"}, "values.yaml", ValuesModel)
    assert "monte_carlo" in str(exc.value)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"monte_carlo": {"permutations": 1}}, "monte_carlo.permutations"),
        ({"near_duplicates": {"threshold": 1.5}}, "near_duplicates.threshold"),
        ({"k": 0}, "k"),
        ({"utility": "map"}, "utility"),
    ],
)
def test_a_bad_value_names_its_field(data: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        parse_study(data, "values.yaml", ValuesModel)


def test_retbench_values_names_file_line_and_field_of_a_bad_key_and_exits_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from retbench.cli import app

    path = tmp_path / "values.yaml"
    path.write_text("name: v\nutility: recall\nk: 10\nnear_duplicates: {treshold: 0.9}\n")
    res = CliRunner().invoke(app, ["values", str(path)])
    assert res.exit_code == 2
    assert f"{path}:4" in res.output and "near_duplicates.treshold" in res.output
    assert len(res.output.strip().splitlines()) == 1
