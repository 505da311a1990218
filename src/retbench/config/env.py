"""Secrets named by `*_env` fields: present before any work starts, and registered for redaction.

A config never holds a secret, only the name of the environment variable that does
(`password_env: RETBENCH_PG_PASSWORD`, `api_key_env: ...`, `headers_env: {X-Key: VAR}`). The loader
walks the whole document for such fields, so a missing variable is refused before the first system
runs (not after four systems have finished), and every value read is registered with
`retbench.secrets` here, in one place, so no adapter can forget to mask it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

from retbench.errors import ConfigError
from retbench.secrets import register


def env_fields(data: object, where: str = "") -> Iterator[tuple[str, str]]:
    """(field, variable name) of every `*_env` field in a config document, in document order."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            fld = f"{where}.{key}" if where else str(key)
            if isinstance(key, str) and key.endswith("_env"):
                if isinstance(value, str):
                    yield fld, value
                elif isinstance(value, Mapping):  # headers_env: {header name: variable}
                    yield from ((f"{fld}.{k}", v) for k, v in value.items() if isinstance(v, str))
                continue
            yield from env_fields(value, fld)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            yield from env_fields(item, f"{where}[{i}]")


def check_env(data: object, source: str | None = None, prefix: str = "") -> dict[str, str]:
    """Every variable named by a `*_env` field is set (non-empty); each value is registered as a secret.

    Returns {variable: field}. The message names the variable and the field (under `prefix`), never a value.
    """
    seen: dict[str, str] = {}
    for fld, var in env_fields(data, prefix):
        if var in seen:
            continue
        value = os.environ.get(var)
        if not value:
            raise ConfigError(
                f"environment variable {var!r} is not set (it holds the secret this field names; "
                "set it before running)",
                path=source,
                field=fld,
            )
        register(value)
        seen[var] = fld
    return seen
