"""The stress config: a `retbench run` experiment with one dataset and one system, plus a `stress:` block."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retbench.config import DatasetSpec, SystemSpec, load
from retbench.errors import ConfigError
from retbench.retrievers.faults import FaultSpec
from retbench.studies.benchmark import ExperimentConfig
from retbench.studies.benchmark import parse_config as parse_experiment
from retbench.studies.stress.settings import LoadSettings

# -- config ----------------------------------------------------------------------------------------
STRESS_KEYS = ("stress",)


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
    """Validate a stress config: the experiment part by `experiment.parse_config`, then the rest."""

    if not isinstance(raw, Mapping):
        raise ConfigError("a stress config must be a mapping", path=source, field="<top>")
    rest = {k: v for k, v in raw.items() if k not in STRESS_KEYS}
    faults: dict[str, Any] = {}
    systems = rest.get("systems")
    if isinstance(systems, list):
        rest["systems"] = []
        for i, sys_raw in enumerate(systems):
            if isinstance(sys_raw, Mapping) and "faults" in sys_raw:
                if not isinstance(sys_raw["faults"], Mapping):
                    raise ConfigError("faults must be a mapping", path=source, field=f"systems[{i}].faults")
                faults = dict(sys_raw["faults"])
                sys_raw = {k: v for k, v in sys_raw.items() if k != "faults"}
            rest["systems"].append(sys_raw)
    exp = parse_experiment(rest, source, output)
    for what in ("datasets", "systems"):
        n = len(getattr(exp, what))
        if n != 1:
            raise ConfigError(f"stress takes exactly one {what[:-1]}, got {n}", path=source, field=what)
    if faults:
        FaultSpec.from_config(faults, source)
    block = raw.get("stress") or {}
    if not isinstance(block, Mapping):
        raise ConfigError("must be a mapping", path=source, field="stress")
    return StressConfig(exp, LoadSettings.from_config(block, source), faults, dict(raw))


def load_config(path: str | Path, output: str | Path | None = None) -> StressConfig:
    """Read and validate a stress YAML file."""
    return load(path, parse_config, output)
