"""`retbench schema KIND`: the JSON Schema of every config kind, checked in under schemas/, named by every shipped config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from repo_paths import CONFIGS, ROOT
from retbench.cli import app
from retbench.config.schema import KINDS

SHIPPED = sorted(CONFIGS.glob("*.yaml"))
SCHEMA_COMMENT = re.compile(r"^# yaml-language-server: \$schema=\.\./schemas/([a-z-]+)\.json$")
runner = CliRunner()


def schema_of(kind: str) -> dict:
    res = runner.invoke(app, ["schema", kind])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_checked_in_schema_is_what_retbench_schema_prints(kind: str) -> None:
    printed = runner.invoke(app, ["schema", kind]).output
    assert (ROOT / "schemas" / f"{kind}.json").read_text(encoding="utf-8") == printed, (
        f"schemas/{kind}.json is stale: regenerate it with `retbench schema {kind} > schemas/{kind}.json`"
    )


def test_the_default_kind_is_the_experiment() -> None:
    assert runner.invoke(app, ["schema"]).output == runner.invoke(app, ["schema", "experiment"]).output


def test_an_unknown_kind_lists_the_kinds_and_exits_2() -> None:
    res = runner.invoke(app, ["schema", "experimnet"])
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1
    for kind in KINDS:
        assert kind in res.output


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_config_names_its_schema_and_validates_against_it(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    m = SCHEMA_COMMENT.match(first)
    assert m, f"{path.name} does not start with a yaml-language-server $schema comment"
    schema = json.loads((ROOT / "schemas" / f"{m[1]}.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(path.read_text("utf-8"))))
    assert not errors, [(list(e.path), e.message) for e in errors]


def test_the_schema_rejects_a_misspelt_key_at_any_depth() -> None:
    schema = schema_of("experiment")
    good = yaml.safe_load((CONFIGS / "scifact.yaml").read_text("utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid(good)
    top = {**good, "depht": 10}
    assert not validator.is_valid(top)
    nested = {**good, "datasets": [{"name": "scifact", "max_querys": 5}]}
    assert not validator.is_valid(nested)
    evaluation = {**good, "evaluation": {"mode": "trec-eval"}}  # not one of the choices
    assert not validator.is_valid(evaluation)


def test_the_schema_takes_the_shorthands_the_loader_takes() -> None:
    validator = jsonschema.Draft202012Validator(schema_of("experiment"))
    body = {"datasets": ["scifact"], "systems": [{"adapter": "bm25s"}], "executor": "ray", "reference": "bm25s"}
    assert validator.is_valid(body)


def test_every_criteria_and_judge_kind_rejects_a_misspelt_key() -> None:
    criteria = jsonschema.Draft202012Validator(schema_of("criteria"))
    assert criteria.is_valid({"gates": [{"name": "a", "metric": "recall@5", "threshold": 0.5}]})
    assert not criteria.is_valid({"gates": [{"name": "a", "metric": "recall@5", "treshold": 0.5}]})
    judge = jsonschema.Draft202012Validator(schema_of("judge"))
    assert judge.is_valid({"judge": {"base_url": "http://127.0.0.1:8080"}})
    assert not judge.is_valid({"judge": {"base_url": "http://127.0.0.1:8080", "temprature": 0}})


def test_every_fusion_method_and_normalisation_a_config_may_name_fuses_and_no_other():
    import typing

    from retbench.config.experiment import FusionName, NormalizationName
    from retbench.retrievers.fusion import COMBINE, fuse

    a, b = [("a", 3.0), ("b", 2.0), ("c", 1.0)], [("c", 0.9), ("a", 0.5), ("d", 0.1)]
    for method in typing.get_args(FusionName):
        for norm in typing.get_args(NormalizationName):
            assert {d for d, _ in fuse([a, b], method, normalization=norm, param=1.0)} == {"a", "b", "c", "d"}
    assert set(COMBINE) | {"rrf"} == set(typing.get_args(FusionName))
