"""The top of every study's config: the validated model a study runs on, and how it is loaded.

A study (`run`, `stress`, `chunking`, `ingest-impact`, `judge-calibrate`) runs on its validated model
itself: no raw mapping is kept or read after loading, and no second object repeats the model's
fields. What the model cannot know from the file alone is set once, here: the file it was read from
(`source`, which relative paths and error messages name) and an `--output` override. Values a study
derives from the model (dataset specs, canonical metric names, cutoffs) are properties of the model.

`load_study(path, Model, output, check)` reads the file, validates it, locates it and runs `check`
(the study's checks against factories, which live above this package: adapters, rerankers, chunkers,
prompts) on the model; every error, `check`'s included, names file:line and field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import PrivateAttr

from retbench.config.base import Block, validate
from retbench.config.loader import load, read_config
from retbench.errors import ConfigError
from retbench.secrets import register_url

S = TypeVar("S", bound="Study")


class Study(Block):
    """A study's whole config, validated; `source` and the output override are set by the loader."""

    _source: str = PrivateAttr("<config>")

    @property
    def source(self) -> str:
        """The config file the model was read from (`<config>` for a mapping given in Python)."""
        return self._source

    @property
    def study_name(self) -> str:
        """The study's `name:`, else the config file's name without its suffix."""
        return getattr(self, "name", None) or Path(self._source).stem

    @property
    def output_dir(self) -> Path:
        """The results folder: `output:` (or the override the loader was given), else `results/<name>`."""
        out = getattr(self, "output", None)
        return Path(out) if out else Path("results") / self.study_name

    def located(self: S, source: str, output: str | Path | None = None) -> S:
        """This model read from `source`, writing to `output` when given (the command line's `--output`)."""
        out = self.model_copy(update={"output": str(output)}) if output is not None else self.model_copy()
        out._source = source
        return out

    def resolved(self) -> dict[str, Any]:
        """What ran, as JSON: every field with its default filled in and every path resolved (the manifest's
        `config.resolved`). Secret values never appear: a config names environment variables, not keys."""
        return _public(self.model_dump(mode="json", by_alias=True))


def _public(value: Any) -> Any:
    """`value` with every URL in its public form (`secrets.register_url`: userinfo and secret-looking query
    values registered for redaction and masked), so a store DSN's password never reaches a manifest."""
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_public(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return register_url(value)
    return value


def parse_study(
    data: object,
    source: str,
    model: type[S],
    output: str | Path | None = None,
    check: Callable[[S], None] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> S:
    """`data` validated by `model`, located at `source`, then `check`ed; errors name the field.

    `overrides` replace top-level keys of the mapping before it is validated (a label study runs an
    experiment's systems over its own dataset: `{"datasets": [folder]}`)."""
    if overrides and isinstance(data, dict):
        data = {**data, **overrides}
    out = validate(model, data, source).located(source, output)
    if check is not None:
        check(out)
    return out


def load_study(
    path: str | Path,
    model: type[S],
    output: str | Path | None = None,
    check: Callable[[S], None] | None = None,
    *,
    what: str = "config file",
    overrides: Mapping[str, object] | None = None,
) -> S:
    """Read a study's YAML file into its validated `model` (see the module docstring); errors name file:line."""
    return load(path, parse_study, model, output, check, overrides, what=what)


def declared_systems(path: str | Path) -> list[tuple[str, dict[str, object]]]:
    """(adapter, params) of every system a config file declares, read before the config is checked in full.

    `retbench services` and `run --services local` need them to start the servers whose secrets the full
    check (`*_env` variables) then finds in the environment; nothing else reads a config unvalidated.
    """
    data, _ = read_config(path)
    systems = data.get("systems") if isinstance(data, dict) else None
    if not isinstance(systems, list):
        raise ConfigError("expected a list of systems", path=path, field="systems")
    out = []
    for entry in systems:
        if isinstance(entry, dict) and isinstance(entry.get("adapter"), str):
            params = entry.get("params")
            out.append((entry["adapter"], dict(params) if isinstance(params, dict) else {}))
    return out
