"""The one loader: read a YAML config once, validate it, check its secrets, and name file:line on error.

`load(path, parse)` reads the file (with the alias bound of `io.files`), hands the data to the
kind's `parse(data, source, ...)` (which validates it with its model and builds what the study runs
on), then checks every environment variable a `*_env` field names. Any `ConfigError` raised on the
way that names a field but no line is given the line of that field (the nearest enclosing field when
the exact one has no line of its own, e.g. a missing key), so every error reads
`configs/x.yaml:12: field 'systems[1].params.k3': ...`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from retbench.config.env import check_env
from retbench.config.lines import field_lines, locate, strict_loader
from retbench.errors import ConfigError
from retbench.io.files import load_yaml_text, require_file

T = TypeVar("T")


def read_config(path: str | Path, what: str = "config file") -> tuple[Any, str]:
    """(data, text) of a YAML config file; a syntax error, a key written twice or an integer too long to
    read names the file and line."""
    p = require_file(path, what)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start}: {exc.reason})", path=p) from None
    return load_yaml_text(text, p, strict_loader()), text


def load(path: str | Path, parse: Callable[..., T], *args: object, what: str = "config file", **kwargs: object) -> T:
    """Read a YAML config and `parse(data, source, *args, **kwargs)`; check its `*_env` variables.

    Every error that names a field gains the file and that field's line (`what` names the file when
    it is missing).
    """
    source = str(path)
    data, text = read_config(path, what)
    try:
        out = parse(data, source, *args, **kwargs)
        check_env(data, source)
    except ConfigError as exc:
        raise locate(exc, source, field_lines(text)) from None
    return out
