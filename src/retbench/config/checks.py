"""Small hand-written checks for the few blocks a model does not declare yet (a fault plan's fields).

New config blocks are declared as models (`config.base.Block`); these remain for callers that check
a mapping their own way, and raise the same `ConfigError` the loader gives a file and line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, TypeGuard, TypeVar

from retbench.config.base import unknown_key_message
from retbench.errors import ConfigError

V = TypeVar("V")


def require(cond: bool, msg: str, source: str | None, fld: str) -> None:
    if not cond:
        raise ConfigError(msg, path=source, field=fld)


def is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def positive_int(v: V, source: str | None, fld: str, *, optional: bool = False) -> V:
    """`v` when it is an integer >= 1 (or None when optional)."""
    require((optional and v is None) or (is_int(v) and v > 0), f"must be a positive integer, got {v!r}", source, fld)
    return v


def mapping(v: Any, source: str | None, fld: str) -> dict[str, Any]:
    require(v is None or isinstance(v, Mapping), "must be a mapping", source, fld)
    return dict(v or {})


def known_keys(
    obj: Mapping[str, object],
    allowed: set[str] | frozenset[str],
    source: str | None,
    where: str,
    line: int | None = None,
) -> None:
    """Every key of a config block is one it knows; the first unknown one is named as `where.key`."""
    extra = sorted(set(obj) - set(allowed), key=str)
    if extra:
        fld = f"{where}.{extra[0]}" if where else str(extra[0])
        msg = unknown_key_message(extra[0], sorted(allowed))
        raise ConfigError(msg, path=source, line=line, field=fld)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


_TYPE_CHECKS: dict[str, Callable[[object], bool]] = {
    "int": is_int,
    "float": _is_number,
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "None": lambda v: v is None,
    "list": lambda v: isinstance(v, list),
    "Sequence": lambda v: isinstance(v, list),
    "dict": lambda v: isinstance(v, Mapping),
    "Mapping": lambda v: isinstance(v, Mapping),
}


def check_types(cls: type, block: Mapping[str, object], source: str | None, where: str) -> None:
    """Each value of `block` has the type its dataclass field declares (int, float, bool, str, None,
    list, mapping, or a union of them), so a bad setting is a config error before any work starts."""
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in block:
            continue
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        checks = [_TYPE_CHECKS.get(alt.strip().split("[")[0]) for alt in ann.split("|")]
        if any(c is None for c in checks):
            continue  # a type this check does not know: the block's own check() covers it
        v = block[f.name]
        if not any(c(v) for c in checks if c is not None):
            fld = f"{where}.{f.name}" if where else f.name
            raise ConfigError(f"must be {ann.replace(' | None', ' or null')}, got {v!r}", path=source, field=fld)
