"""Where each field of a YAML document is: the line every config error names."""

from __future__ import annotations

import functools
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


@functools.cache
def strict_loader() -> type:
    """A PyYAML safe loader that refuses what it would otherwise take silently or crash on.

    - A key written twice in one mapping: PyYAML keeps the last value, so a setting the user wrote
      is dropped without a word. Both lines are named. Keys a merge (`<<: *base`) brings in may still
      be overridden; only keys written out twice are refused.
    - An integer longer than Python's int-to-string limit (`sys.get_int_max_str_digits`, 4300 digits):
      PyYAML's int constructor raises a bare ValueError; here it becomes a YAML error at its line.
    Errors are `yaml.constructor.ConstructorError`s, which `io.files.load_yaml_text` turns into
    `file:line: ...` config errors.
    """
    import yaml
    from yaml.constructor import ConstructorError

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                        continue
                    key = self.construct_object(key_node)
                    line = key_node.start_mark.line + 1
                    if key in seen:
                        raise ConstructorError(
                            None,
                            None,
                            f"key {key_node.value!r} is written twice (lines {seen[key]} and {line}); "
                            "YAML would keep only the last one: remove one",
                            key_node.start_mark,
                        )
                    seen[key] = line
            return super().construct_mapping(node, deep=deep)

        def construct_yaml_int(self, node: Any) -> Any:
            try:
                return super().construct_yaml_int(node)
            except ValueError:
                digits = sum(c.isdigit() for c in str(node.value))
                raise ConstructorError(
                    None, None, f"an integer of {digits:,} digits is too long to be a setting", node.start_mark
                ) from None

    StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
    return StrictLoader
