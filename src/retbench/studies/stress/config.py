"""The stress config: a `retbench run` experiment with one dataset and one system, plus a `stress:` block.

The study runs on `config.StressModel` itself (its `system`, `dataset`, `k`, `stress` and `fingerprint()`);
this module adds the checks the model cannot make alone (the adapter, the fault plan) and loads it.
"""

from __future__ import annotations

from pathlib import Path

from retbench.config import StressModel
from retbench.config.study import load_study, parse_study
from retbench.errors import ConfigError
from retbench.studies.benchmark import check_experiment


def check_stress(cfg: StressModel) -> None:
    """The experiment part's checks (the fault plan and the load are checked by the model itself)."""
    check_experiment(cfg)
    for i, system in enumerate(cfg.systems):
        if system.scope is not None:  # the stress driver searches unscoped: a scope would be silently ignored
            raise ConfigError(
                "a stress run searches without a scope stage; remove `scope` (it is for `retbench run`)",
                path=cfg.source,
                field=f"systems[{i}].scope",
            )


def parse_config(data: object, source: str = "<config>", output: str | Path | None = None) -> StressModel:
    """Validate a stress config (`config.StressModel`): the experiment part, the fault plan, the load."""
    return parse_study(data, source, StressModel, output, check_stress)


def load_config(path: str | Path, output: str | Path | None = None) -> StressModel:
    """Read and validate a stress YAML file."""
    return load_study(path, StressModel, output, check_stress)
