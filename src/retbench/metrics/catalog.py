"""The metric catalog: which metrics exist (built-ins and plugins), how one is added, and each one's declaration.

A metric is registered once under its name and aliases (`register`); plugins come from the `retbench.metrics`
entry-point group on first use. Turning a typed name (`ndcg@10`, `P_5`, `recall@5(rel=2)`) into a metric at a
cutoff is metrics/registry.py's job; this module only keeps the rows that parsing reads.

Adding a metric (the `Metric` protocol, `register()`, the entry points): docs/howto/plugins.md.
"""

from __future__ import annotations

import re
from typing import Any

import retbench.metrics.answers as answers
import retbench.metrics.families as families
import retbench.metrics.judged as judged
import retbench.metrics.retrieval as retrieval
import retbench.metrics.rubric as rubric
import retbench.metrics.trec_rows as trec_rows
from retbench.errors import ConfigError
from retbench.metrics.base import CUTOFFS, Metric, checked_row, row_of

ENTRY_POINT_GROUP = "retbench.metrics"

_REGISTRY: dict[str, Metric] = {}
_LOOKUP: dict[str, str] = {}  # lower-cased name or alias -> registered name
_PLUGIN_ERRORS: dict[str, str] = {}
_FAMILIES: dict[str, tuple[Metric, bool]] = {}  # trec_families(), emptied whenever the registry changes
_PLUGINS_LOADED = False


def register(metric: Metric, *, replace: bool = False) -> Metric:
    """Add a metric (an object following the `Metric` protocol, with any `MetricRow` declarations); returns it, so it
    works as a decorator on instances. A declaration of the wrong kind is refused here, naming its field."""
    if not isinstance(metric, Metric):  # the protocol's members: name, cutoff, compute
        raise ConfigError(f"a metric needs a name, a cutoff and a compute(ctx, k, params) method, got {metric!r}")
    name, cutoff = metric.name, metric.cutoff
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][\w\-]*", name):
        raise ConfigError(f"a metric needs a name of letters, digits, '_' or '-', got {name!r}")
    if cutoff not in CUTOFFS or not callable(metric.compute):
        raise ConfigError(f"metric {name!r} must have cutoff in {CUTOFFS} and a compute(ctx, k, params) method")
    row = checked_row(metric)
    keys = [name.lower(), *(a.lower() for a in row.aliases)]
    for key in keys:
        owner = _LOOKUP.get(key)
        if owner is not None and owner != name and not replace:
            raise ConfigError(f"metric name {key!r} is already taken by {owner!r}")
    if name in _REGISTRY and not replace:
        raise ConfigError(f"metric {name!r} is already registered (pass replace=True to override)")
    _REGISTRY[name] = metric
    _FAMILIES.clear()
    for key in keys:
        _LOOKUP[key] = name
    return metric


def unregister(name: str) -> None:
    """Remove a registered metric and its aliases (tests, notebooks)."""
    _REGISTRY.pop(name, None)
    _FAMILIES.clear()
    for key in [k for k, v in _LOOKUP.items() if v == name]:
        del _LOOKUP[key]


def _load_plugins() -> None:
    """Register metrics exposed under the `retbench.metrics` entry-point group (once)."""
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            metric = obj() if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "compute")) else obj
            if not isinstance(metric, Metric) or metric.name not in _REGISTRY:
                register(metric)
        except Exception as exc:  # a broken plugin must not break the built-ins; it is reported by name
            _PLUGIN_ERRORS[ep.name] = f"{type(exc).__name__}: {exc}"


def reload_plugins() -> None:
    """Look at the entry points again (after installing a plugin in a running process)."""
    global _PLUGINS_LOADED
    _PLUGINS_LOADED = False
    _load_plugins()


def plugin_errors() -> dict[str, str]:
    """{entry-point name: why it failed to load}: unknown-metric errors name them, so a broken plugin is found."""
    _load_plugins()
    return dict(_PLUGIN_ERRORS)


def available() -> dict[str, Metric]:
    """Registered metrics by name (built-ins and plugins)."""
    _load_plugins()
    return dict(_REGISTRY)


def named(name: str) -> Metric | None:
    """The metric registered under this name or alias (case-insensitive); None for any other spelling."""
    _load_plugins()
    target = _LOOKUP.get(name.lower())
    return _REGISTRY[target] if target is not None else None


def valid_names() -> list[str]:
    """Metric names with their cutoff form, for help texts and error messages."""
    out = []
    for name, m in available().items():
        out.append(f"{name}@k" if m.cutoff == "k" else f"{name}[@k]" if m.cutoff == "optional" else name)
    return out


def describe(metric: Metric) -> dict[str, Any]:
    """A metric's declaration as data (as ir_measures declares measures): what reports, the docs and
    `retbench metrics` show. Plugins that declare only the `Metric` protocol get `MetricRow`'s defaults."""
    row = row_of(metric)
    params = {"rel": 1, **row.params} if row.binary else dict(row.params)
    return {
        "name": metric.name,
        "label": row.label or metric.name,
        "meaning": (row.meaning or row.description).replace("{k}", "k"),
        "definition": row.description,
        "cutoff": metric.cutoff,
        "aliases": list(row.aliases),
        "parameters": params,
        "trec_eval": [re.sub(r"\{(\w+)[^}]*\}", r"\1", n) for n in (row.trec, row.trec_cut) if n],
        "trec_defaults": list(row.trec_defaults),
        "aggregate": row.aggregate,
        "range": list(row.value_range or ()),
        "lower_is_better": row.lower_is_better,
        "answer_side": row.answer_side,
        "unit": row.unit,
    }


def catalog() -> list[dict[str, Any]]:
    """Every registered metric's declaration (`describe`), built-ins then plugins, in registration order."""
    return [describe(m) for m in available().values()]


def _family(template: str) -> str:
    """The trec_eval family a printed-name template belongs to: `P_{k}` -> `P`, `set_F_{beta:g}` -> `set_F`,
    `rbp_p={p:g}` -> `rbp` (the part before the last `_` ahead of the first field)."""
    return re.split(r"_(?=[^_{]*\{)", template, maxsplit=1)[0]


def trec_families() -> dict[str, tuple[Metric, bool]]:
    """{trec_eval measure family: (its metric, whether the bare family is one measure)}, read from the rows'
    `trec` (the name uncut, at default parameters) and `trec_cut` (the name template with parameters)."""
    _load_plugins()
    if _FAMILIES:
        return _FAMILIES
    out = _FAMILIES
    for m in _REGISTRY.values():
        row = row_of(m)
        plain, cut = row.trec, row.trec_cut
        if cut:
            out.setdefault(_family(cut), (m, False))
        if plain:
            out[plain] = (m, True)
    return out


for _m in [
    *retrieval.builtins(),
    *trec_rows.builtins(),
    *answers.builtins(),
    *judged.builtins(),
    *rubric.builtins(),
    *families.builtins(),
]:
    register(_m)  # type: ignore[arg-type]
