"""Typed models for every config file retbench reads, one loader, and their JSON Schemas.

Kinds (`retbench schema KIND`): experiment (and suite), chunking, ingest-impact, stress, judge,
calibration, criteria; see `config.schema.KINDS`. Every model is a strict, closed `Block`
(`config.base`): validation is declared on the fields, and the loader (`config.loader.load`) turns
the first problem into `file:line: field 'a.b[1].c': message` with the valid choices. Relative paths
resolve against the config file's folder (then `$RETBENCH_CACHE`); every variable a `*_env` field
names must be set, and its value is registered for redaction, before any work starts.

This package sits below `retrievers/`: it holds systems generically (adapter + params); each study
checks them against their factories with `retrievers.base.check_system` right after loading.
"""

from __future__ import annotations

from retbench.config.base import Block, ConfigPath, ModelFile, field_error, resolve_path, validate
from retbench.config.checks import check_types, is_int, known_keys, mapping, positive_int, require
from retbench.config.common import (
    DatasetBlock,
    DatasetSpec,
    EncoderSettings,
    EvalBlock,
    SystemBlock,
    folder_name,
    sample_ids,
)
from retbench.config.env import check_env, env_fields
from retbench.config.experiment import ExperimentModel
from retbench.config.judge import JudgeSettings, LocalServer
from retbench.config.lines import field_lines, line_of, locate
from retbench.config.loader import load, read_config
from retbench.config.stress import LoadSettings, StressModel

__all__ = [
    "Block",
    "ConfigPath",
    "DatasetBlock",
    "DatasetSpec",
    "EncoderSettings",
    "EvalBlock",
    "ExperimentModel",
    "JudgeSettings",
    "LoadSettings",
    "LocalServer",
    "ModelFile",
    "StressModel",
    "SystemBlock",
    "check_env",
    "check_types",
    "env_fields",
    "field_error",
    "field_lines",
    "folder_name",
    "is_int",
    "known_keys",
    "line_of",
    "load",
    "locate",
    "mapping",
    "positive_int",
    "read_config",
    "require",
    "resolve_path",
    "sample_ids",
    "validate",
]
