"""Metadata filters on queries: one small language, checked once, applied exactly or passed to a store.

A query (BEIR `queries.jsonl` or a golden sample) may carry `metadata.filter`, a mapping of document
metadata fields to conditions; all conditions must hold (AND):

    {"lang": "en"}                          equality (strings, integers, floats, booleans)
    {"year": {"gte": 2010, "lt": 2020}}     a range: any of gt, gte, lt, lte (numbers only)
    {"lang": "en", "year": {"gte": 2010}}   both

A document without the field never matches. Field names are plain identifiers ([A-Za-z_][A-Za-z0-9_]*),
so every store's filter syntax can carry them unquoted.

`Filter.matches` is the exact reference (FAISS applies it through an id selector, so the filtered
exact search is a true brute force over the matching documents); each store translates `Filter.terms`
into its own syntax (SQL, Milvus expressions, Typesense `filter_by`) and the benchmark measures how
much of the exact filtered answer each store returns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Protocol

from retbench.data import Queries
from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject, JSONValue

OPS = ("eq", "gt", "gte", "lt", "lte")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CMP = {
    "eq": lambda a, b: a == b,
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
}

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Filter:
    """Conditions (field, op, value), all of which must hold."""

    terms: tuple[tuple[str, str, Scalar], ...]

    def matches(self, metadata: Mapping[str, object] | None) -> bool:
        """Does a document with this metadata pass? (the exact reference every store is held to)"""
        meta = metadata or {}
        for field, op, value in self.terms:
            if field not in meta:
                return False
            have = meta[field]
            if op == "eq":
                if not _same(have, value):
                    return False
            elif not (_number(have) and _CMP[op](have, value)):
                return False
        return True

    def as_dict(self) -> JSONObject:
        out: JSONObject = {}
        ranges: dict[str, dict[str, Scalar]] = {}
        for field, op, value in self.terms:
            if op == "eq":
                out[field] = value
            else:
                out[field] = bounds = ranges.setdefault(field, {})
                bounds[op] = value
        return out


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _same(have: object, value: Scalar) -> bool:
    """Equality without Python's True == 1: a boolean equals only a boolean, a number only a number."""
    if isinstance(value, bool) or isinstance(have, bool):
        return isinstance(have, bool) and isinstance(value, bool) and have is value
    if _number(value):
        return _number(have) and have == value
    return have == value


def parse_filter(spec: object, where: str = "filter") -> Filter | None:
    """A Filter from its mapping form (None or {} means no filter); bad input names the field."""
    if spec is None or spec == {}:
        return None
    if not isinstance(spec, Mapping):
        raise ConfigError(f"a filter must be a mapping of field -> value or range, got {spec!r}", field=where)
    terms: list[tuple[str, str, Scalar]] = []
    for field, cond in spec.items():
        if not isinstance(field, str) or not _FIELD.match(field):
            raise ConfigError(f"filter field {field!r} must be an identifier ([A-Za-z_][A-Za-z0-9_]*)", field=where)
        if isinstance(cond, Mapping):
            if not cond:
                raise ConfigError(f"empty range for filter field {field!r}", field=f"{where}.{field}")
            for op, value in cond.items():
                if op not in OPS[1:]:
                    raise ConfigError(
                        f"unknown range operator {op!r} for {field!r}; expected gt, gte, lt or lte",
                        field=f"{where}.{field}",
                    )
                if not _number(value):
                    raise ConfigError(f"range bound {op} of {field!r} must be a number", field=f"{where}.{field}")
                terms.append((field, op, value))
        elif isinstance(cond, (str, int, float, bool)):
            terms.append((field, "eq", cond))
        else:
            raise ConfigError(
                f"filter value of {field!r} must be a string, number or boolean", field=f"{where}.{field}"
            )
    return Filter(tuple(terms))


def query_filters(queries: Queries, qids: Sequence[str]) -> list[Filter | None]:
    """Each query's filter from `queries.metadata[qid]["filter"]` (None where it has none)."""
    meta = getattr(queries, "metadata", None) or {}
    return [parse_filter((meta.get(q) or {}).get("filter"), where=f"query {q}: metadata.filter") for q in qids]


def metadata_fields(metadata: Sequence[Mapping[str, JSONValue]] | None) -> dict[str, type]:
    """Field -> Python type over a corpus' metadata (scalar fields only; mixed int/float become float).

    Stores with typed columns (LanceDB, Typesense) declare these; a field whose values disagree in type
    (or that holds lists or mappings) is left out, and a filter on it then matches nothing there.
    """
    seen: dict[str, set[type]] = {}
    for meta in metadata or []:
        for field, value in (meta or {}).items():
            if isinstance(field, str) and _FIELD.match(field):
                seen.setdefault(field, set()).add(type(value))
    out: dict[str, type] = {}
    for field, types in seen.items():
        if types <= {int, float} and types:
            out[field] = float if float in types else int
        elif len(types) == 1 and next(iter(types)) in (str, bool):
            out[field] = next(iter(types))
    return out


class Capable(Protocol):
    """What the filter check reads of a retriever (`retrievers.base.Retriever` has it; the base imports this
    module, so the check names only these members)."""

    name: str
    adapter: str

    @property
    def capabilities(self) -> Set[str]: ...


def require_filters(retriever: Capable, filters: Sequence[Filter | None]) -> None:
    """Refuse (ConfigError naming metadata.filter) filtered queries for a system without the ability."""
    n = sum(f is not None for f in filters)
    if n and "filters" not in retriever.capabilities:
        raise ConfigError(
            f"system {retriever.name!r} (adapter {retriever.adapter!r}) cannot apply metadata filters, and "
            f"{n} queries carry one (metadata.filter)",
            field="metadata.filter",
        )
