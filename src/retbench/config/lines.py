"""Where each field of a YAML document is: the line every config error names."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from retbench.errors import ConfigError


def field_lines(text: str) -> dict[str, int]:
    """Line (1-based) of every field of a YAML document: {"systems[1].params.k3": 12, ...}."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    out: dict[str, int] = {}

    def walk(node: Any, where: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = f"{where}.{key.value}" if where else str(key.value)
                out.setdefault(name, key.start_mark.line + 1)
                walk(value, name)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                name = f"{where}[{i}]"
                out.setdefault(name, item.start_mark.line + 1)
                walk(item, name)

    if root is not None:
        out["<top>"] = root.start_mark.line + 1
        walk(root, "")
    return out


_PARENT = re.compile(r"(\.[^.\[\]]+|\[\d+\])$")


def line_of(lines: Mapping[str, int], fld: str | None) -> int | None:
    """The line of `fld`, else of the nearest enclosing field that has one."""
    while fld:
        if fld in lines:
            return lines[fld]
        parent = _PARENT.sub("", fld)
        if parent == fld:
            break
        fld = parent
    return None


def locate(exc: ConfigError, source: str, lines: Mapping[str, int], prefix: str = "") -> ConfigError:
    """The same error naming `source`, the line of its field, and the field under `prefix`."""
    if exc.path not in (None, source) or exc.line is not None:
        return exc
    fld = exc.field
    if prefix and fld and not fld.startswith(prefix):
        fld = f"{prefix}.{fld}"
    return ConfigError(exc.reason, path=source, line=line_of(lines, fld), field=fld)
