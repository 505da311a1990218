"""`retbench tune` under a cost limit: only settings whose cost per 1,000 queries is known and within it are chosen
from; an unpriced measured item makes a cost missing, never zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from retbench.errors import ConfigError, InputError
from retbench.studies.tune import load_config, run_tune

CPU = {"price": 0.0000236, "source": "example CPU machine price", "example": True}


def write(tmp_path: Path, costs: dict | None, limit: float) -> Path:
    exp = {
        "name": "t",
        "depth": 20,
        "metrics": ["ndcg@10"],
        "datasets": [{"name": "scifact", "split": "test", "max_queries": 24, "corpus_sample": 300}],
        "systems": [{"name": "bm25", "adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75}}],
    }
    if costs is not None:
        exp["costs"] = costs
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    tune = {
        "experiment": "exp.yaml",
        "system": "bm25",
        "metric": "ndcg@10",
        "folds": 3,
        "grid": {"params.k1": [0.9, 1.2]},
        "max_cost_per_1k_queries": limit,
    }
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(tune, sort_keys=False))
    return path


def test_settings_within_the_limit_are_chosen_from_and_each_settings_cost_is_recorded(tmp_path: Path) -> None:
    out = run_tune(load_config(write(tmp_path, {"cpu_second": CPU}, 1e6), tmp_path / "out"), log=lambda _: None)
    record = json.loads((tmp_path / "out" / "tune.json").read_text())["cost_limit"]
    assert record["currency"] == "USD" and len(record["settings"]) == 3 == len(out.settings)
    assert all(r["within"] and r["cost_per_1k_queries"] > 0 for r in record["settings"])


def test_a_limit_no_setting_meets_and_unpriced_costs_are_errors_that_list_the_costs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no setting costs at most 0 USD per 1,000 queries \(default"):
        run_tune(load_config(write(tmp_path, {"cpu_second": CPU}, 0.0), tmp_path / "a"), log=lambda _: None)
    unpriced = {"index_gb_month": {"price": 0.08, "source": "example disk price"}}
    with pytest.raises(InputError, match="missing"):
        run_tune(load_config(write(tmp_path, unpriced, 1e6), tmp_path / "b"), log=lambda _: None)


def test_a_cost_limit_without_prices_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_cost_per_1k_queries"):
        load_config(write(tmp_path, None, 1.0), tmp_path / "c")
