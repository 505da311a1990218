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
