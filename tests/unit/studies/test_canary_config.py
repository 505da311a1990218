"""The shipped canary config stays a canary config: two dense systems (current first, candidate second) over one
dataset, read by the same check `retbench canary` applies before it searches anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_paths import CONFIGS
from retbench.config import ExperimentModel
from retbench.config.study import load_study
from retbench.errors import ConfigError
from retbench.studies.canary import _two_systems_one_dataset


def test_the_shipped_scifact_canary_names_minilm_then_its_int8_export_over_scifact() -> None:
    cfg = load_study(CONFIGS / "canary-scifact.yaml", ExperimentModel, None, _two_systems_one_dataset, what="canary")
    assert [s.name for s in cfg.systems] == ["minilm", "minilm-onnx-int8"]
    assert [s.adapter for s in cfg.systems] == ["dense", "dense"]
    assert cfg.systems[1].params["encoder"]["kind"] == "onnx"
    assert cfg.dataset_specs[0].spec == "scifact"


def test_a_third_system_is_refused_naming_the_field(tmp_path: Path) -> None:
    text = (CONFIGS / "canary-scifact.yaml").read_text(encoding="utf-8")
    bad = tmp_path / "canary.yaml"
    bad.write_text(text + "  - {name: bm25, adapter: bm25s}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="two systems") as err:
        load_study(bad, ExperimentModel, None, _two_systems_one_dataset, what="canary")
    assert "canary.yaml" in str(err.value)
