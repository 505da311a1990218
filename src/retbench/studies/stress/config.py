"""The stress config: a `retbench run` experiment with one dataset and one system, plus a `stress:` block."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retbench.config import DatasetSpec, StressModel, SystemSpec, load, validate
from retbench.retrievers.faults import FaultSpec
from retbench.studies.benchmark import ExperimentConfig, build_config
from retbench.studies.stress.settings import LoadSettings


# -- config ----------------------------------------------------------------------------------------
@dataclass
class StressConfig:
    """One system on one dataset, written as a `retbench run` experiment plus a `stress:` block.

    The system may carry `faults:` (see `retrievers.faults.FaultSpec`). `depth` is the k of every
    request (and of the short-result rule).
    """

    experiment: ExperimentConfig  # the `retbench run` part: its one dataset and one system
    load: LoadSettings
    faults: dict[str, Any]
    raw: dict[str, Any]

    @property
    def dataset(self) -> DatasetSpec:
        return self.experiment.datasets[0]

    @property
    def system(self) -> SystemSpec:
        return self.experiment.systems[0]

    @property
    def k(self) -> int:
        return self.experiment.depth

    @property
    def metrics(self) -> list[str]:
        return list(self.experiment.metrics)

    @property
    def output(self) -> Path:
        return Path(self.experiment.output)

    @property
    def source(self) -> str:
        return str(self.experiment.source)

    def fingerprint(self) -> str:
        """What must match for a journal to be resumed (the output folder may move)."""
        body = {k: v for k, v in self.raw.items() if k != "output"}
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def parse_config(raw: Any, source: str = "<config>", output: str | Path | None = None) -> StressConfig:
    """Validate a stress config (`config.StressModel`): the experiment part, the fault plan, the load."""
    model = validate(StressModel, raw, source)
    system = model.systems[0]
    faults = dict(system.faults or {})
    if faults:
        FaultSpec.from_config(faults, source)
    rest = {k: v for k, v in raw.items() if k != "stress"}
    rest["systems"] = [{k: v for k, v in raw["systems"][0].items() if k != "faults"}]
    return StressConfig(build_config(model, rest, source, output), model.stress, faults, dict(raw))


def load_config(path: str | Path, output: str | Path | None = None) -> StressConfig:
    """Read and validate a stress YAML file."""
    return load(path, parse_config, output)
