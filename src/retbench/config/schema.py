"""The JSON Schema of every config kind (`retbench schema KIND`), generated from the models.

Editors that speak the YAML language server read a schema named at the top of a YAML file
(`# yaml-language-server: $schema=../schemas/experiment.json`) for completion and checking; the
shipped configs name the schemas checked in under `schemas/`, which a test holds equal to these.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from retbench.config.calibration import CalibrationModel
from retbench.config.chunking import ChunkingModel
from retbench.config.criteria import CriteriaModel
from retbench.config.experiment import ExperimentModel
from retbench.config.impact import IngestModel
from retbench.config.judge import JudgeFile
from retbench.config.stress import StressModel
from retbench.config.tune import TuneModel
from retbench.config.values import ValuesModel

#: kind -> (model, what files of that kind are for)
KINDS: dict[str, tuple[type[BaseModel], str]] = {
    "experiment": (ExperimentModel, "retbench run: systems x datasets"),
    "suite": (ExperimentModel, "retbench run with several datasets (a leaderboard): an experiment"),
    "chunking": (ChunkingModel, "retbench chunking: chunkers x retrievers"),
    "ingest-impact": (IngestModel, "retbench ingest-impact: what adding a document changes"),
    "stress": (StressModel, "retbench stress: one system under load and faults"),
    "judge": (JudgeFile, "judge-relevance --judge: a file with a judge: block"),
    "calibration": (CalibrationModel, "retbench judge-calibrate"),
    "criteria": (CriteriaModel, "retbench gate --criteria: ship criteria"),
    "tune": (TuneModel, "retbench tune: a grid over one system's settings, chosen by cross-validation"),
    "values": (ValuesModel, "retbench values: the value of every document for the queries (Shapley)"),
}


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one config kind."""
    model, what = KINDS[kind]
    schema = model.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"retbench {kind} config",
        "description": what,
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
    }


def schema_text(kind: str) -> str:
    """The schema as the checked-in file holds it (sorted keys, two-space indent, final newline)."""
    return json.dumps(json_schema(kind), indent=2, sort_keys=True) + "\n"
