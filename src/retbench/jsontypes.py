"""The shapes of parsed JSON and YAML, named once for every layer.

`json.loads` and `yaml.safe_load` return a `JSONValue`; a record read from a JSON Lines file or a config block
is a `JSONObject`. A reader narrows a field (`isinstance`) or validates the block with a config model before
using it, so a wrong shape becomes an error naming the field instead of an AttributeError deep inside.
Values about to be written (which may still hold numpy scalars or tuples, made plain by `io.files.json_safe`)
are typed `object`, not these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JSONScalar: TypeAlias = "str | int | float | bool | None"
# Read-only containers (covariant), so a `dict[str, float]` or a `list[str]` being built is already a JSONValue;
# `isinstance(value, dict)` / `isinstance(value, list)` narrows one to the concrete type json.loads returns.
JSONValue: TypeAlias = "JSONScalar | Sequence[JSONValue] | Mapping[str, JSONValue]"
JSONObject: TypeAlias = "dict[str, JSONValue]"
JSONArray: TypeAlias = "list[JSONValue]"


def as_object(value: object) -> Mapping[str, object]:
    """A stored JSON object, or an empty one where the value is none (a section an older file lacks)."""
    return value if isinstance(value, Mapping) else {}


def opt_int(value: object) -> int | None:
    """A stored number as an int (None where it is null, absent or not a number; a bool is not a number)."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def opt_float(value: object) -> float | None:
    """A stored number as a float (None where it is null, absent or not a number; a bool is not a number)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def opt_str(value: object) -> str | None:
    """A stored value as text (None stays None)."""
    return None if value is None else str(value)


def counts(value: object) -> dict[str, int]:
    """A stored object of counts (name -> number), 0 where a count is not a number; empty where it is absent."""
    return {str(k): opt_int(v) or 0 for k, v in as_object(value).items()}
