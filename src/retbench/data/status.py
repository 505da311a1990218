"""The one vocabulary of what happened to a query."""

from __future__ import annotations

from enum import Enum


class QueryStatus(str, Enum):
    """What happened to one query: only `ok` and `empty` are answers; the rest are failures."""

    OK = "ok"
    EMPTY = "empty"
    ERROR = "error"
    TIMEOUT = "timeout"
    INVALID = "invalid"

    @property
    def failed(self) -> bool:
        return self in (QueryStatus.ERROR, QueryStatus.TIMEOUT, QueryStatus.INVALID)
