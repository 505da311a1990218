"""Ship criteria: absolute floors and regression limits against a baseline, with severities.

A typical criteria file lets recall@5 gate merges and keeps MRR as a diagnostic (a warning):

    alpha: 0.05                   # significance level for require_significance
    require_significance: false   # default for every gate
    max_failed_queries: 0         # candidate backend failures tolerated before exit 3
    gates:
      - name: retrieval_recall_at_5
        metric: recall@5          # optional: without it the name is read as a metric name
        threshold: 0.85           # absolute floor for the candidate's mean
        regression_max: 0.03      # may not drop more than 3 pp below the baseline
        severity: error           # error blocks the merge; warning only reports
        require_significance: true  # a drop beyond regression_max blocks only when p < alpha
        tags:                     # optional per-tag floors and drop limits
          multi_hop: {threshold: 0.70, regression_max: 0.05}

Parsing checks every key and names the file, line and field of a bad one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.config import known_keys
from retbench.errors import ConfigError
from retbench.metrics.registry import parse_metric

SEVERITIES = ("error", "warning")
TOP_KEYS = {"gates", "alpha", "require_significance", "max_failed_queries", "description"}
GATE_KEYS = {"name", "metric", "threshold", "regression_max", "severity", "require_significance", "tags", "description"}
TAG_KEYS = {"threshold", "regression_max"}
EPS = 1e-12


@dataclass
class Limits:
    """A floor and a drop limit (either may be absent)."""

    threshold: float | None = None
    regression_max: float | None = None


@dataclass
class Gate:
    name: str
    metric: str  # canonical registry name, e.g. "recall@5"
    limits: Limits
    severity: str = "error"
    require_significance: bool = False
    tags: dict[str, Limits] = field(default_factory=dict)
    line: int | None = None


@dataclass
class Criteria:
    gates: list[Gate]
    alpha: float = 0.05
    max_failed_queries: int = 0
    path: str = "<criteria>"

    @property
    def needs_baseline(self) -> bool:
        return any(
            g.limits.regression_max is not None or any(t.regression_max is not None for t in g.tags.values())
            for g in self.gates
        )


# -- reading the criteria file ------------------------------------------------------------------
def _line_marks(text: str) -> list[dict[str, int]]:
    """Line (1-based) of each gate item and of each of its keys, from the YAML node tree."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return []
    out: list[dict[str, int]] = []
    if not isinstance(root, yaml.MappingNode):
        return out
    for key, value in root.value:
        if key.value == "gates" and isinstance(value, yaml.SequenceNode):
            for item in value.value:
                marks = {"": item.start_mark.line + 1}
                if isinstance(item, yaml.MappingNode):
                    marks.update({k.value: k.start_mark.line + 1 for k, _ in item.value})
                out.append(marks)
    return out


def value_range(name: str) -> tuple[float, float] | None:
    from retbench.metrics.registry import value_range as declared

    return declared(name)


def resolve_metric(name: str) -> str:
    """Canonical metric name from the registry, which also reads underscore spellings (`retrieval_recall_at_5`)."""

    return parse_metric(name).name


def _number(value: Any, where: str, path: str, line: int | None, *, lo: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < lo:
        raise ConfigError(f"must be a number >= {lo:g}, got {value!r}", path=path, line=line, field=where)
    return float(value)


def _limits(obj: Any, where: str, path: str, line: int | None, span: tuple[float, float] | None = None) -> Limits:
    if not isinstance(obj, Mapping):
        raise ConfigError("must be a mapping with threshold and/or regression_max", path=path, line=line, field=where)
    known_keys(obj, TAG_KEYS, path, where, line)
    lim = Limits(
        _number(obj["threshold"], f"{where}.threshold", path, line) if obj.get("threshold") is not None else None,
        _number(obj["regression_max"], f"{where}.regression_max", path, line)
        if obj.get("regression_max") is not None
        else None,
    )
    if lim.threshold is None and lim.regression_max is None:
        raise ConfigError("needs a threshold or a regression_max", path=path, line=line, field=where)
    if span is not None:
        lo, hi = span
        if lim.threshold is not None and not lo <= lim.threshold <= hi:
            raise ConfigError(
                f"threshold {lim.threshold:g} is outside the metric's range [{lo:g}, {hi:g}]"
                + (" (write 0.85, not 85)" if hi == 1.0 and lim.threshold > 1 else ""),
                path=path,
                line=line,
                field=f"{where}.threshold",
            )
        if lim.regression_max is not None and lim.regression_max > hi - lo:
            raise ConfigError(
                f"regression_max {lim.regression_max:g} is larger than the metric's whole range [{lo:g}, {hi:g}]",
                path=path,
                line=line,
                field=f"{where}.regression_max",
            )
    return lim


def parse_criteria(raw: Any, path: str = "<criteria>", text: str = "") -> Criteria:
    """Validate a loaded criteria mapping; every error names the file, line and field."""
    if not isinstance(raw, Mapping):
        raise ConfigError("a criteria file is a mapping with a 'gates' list", path=path)
    known_keys(raw, TOP_KEYS, path, "")
    gates_raw = raw.get("gates")
    if not isinstance(gates_raw, list) or not gates_raw:
        raise ConfigError("must be a non-empty list of gates", path=path, field="gates")
    alpha = _number(raw.get("alpha", 0.05), "alpha", path, None)
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"must be between 0 and 1, got {alpha}", path=path, field="alpha")
    default_sig = raw.get("require_significance", False)
    if not isinstance(default_sig, bool):
        raise ConfigError("must be true or false", path=path, field="require_significance")
    max_failed = raw.get("max_failed_queries", 0)
    if isinstance(max_failed, bool) or not isinstance(max_failed, int) or max_failed < 0:
        raise ConfigError(f"must be an integer >= 0, got {max_failed!r}", path=path, field="max_failed_queries")
    marks = _line_marks(text)
    gates: list[Gate] = []
    seen: set[str] = set()
    for i, g in enumerate(gates_raw):
        gates.append(_parse_gate(g, i, marks[i] if i < len(marks) else {}, path, default_sig, seen))
    return Criteria(gates, alpha, max_failed, path)


def _parse_gate(g: Any, i: int, mk: Mapping[str, int], path: str, default_sig: bool, seen: set[str]) -> Gate:
    """One entry of `gates:` (`mk`: the line of each of its keys; `seen`: the names taken so far)."""
    where = f"gates[{i}]"
    line = mk.get("")
    if not isinstance(g, Mapping):
        raise ConfigError(
            "each gate is a mapping (name, metric, threshold, regression_max, severity)",
            path=path,
            line=line,
            field=where,
        )
    known_keys(g, GATE_KEYS, path, where, line)
    name = g.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("every gate needs a name", path=path, line=line, field=f"{where}.name")
    if name in seen:
        raise ConfigError(
            f"gate name {name!r} is used twice", path=path, line=mk.get("name", line), field=f"{where}.name"
        )
    seen.add(name)
    metric_key = "metric" if g.get("metric") is not None else "name"
    try:
        metric = resolve_metric(str(g[metric_key]))
    except ConfigError as exc:
        raise ConfigError(exc.reason, path=path, line=mk.get(metric_key, line), field=f"{where}.{metric_key}") from None
    severity = g.get("severity", "error")
    if severity not in SEVERITIES:
        raise ConfigError(
            f"must be 'error' or 'warning', got {severity!r}",
            path=path,
            line=mk.get("severity", line),
            field=f"{where}.severity",
        )
    sig = g.get("require_significance", default_sig)
    if not isinstance(sig, bool):
        raise ConfigError(
            "must be true or false",
            path=path,
            line=mk.get("require_significance", line),
            field=f"{where}.require_significance",
        )
    span = value_range(metric)
    limits = _limits({k: g.get(k) for k in TAG_KEYS}, where, path, line, span)
    tags_raw = g.get("tags") or {}
    if not isinstance(tags_raw, Mapping):
        raise ConfigError(
            "must map tag -> {threshold, regression_max}",
            path=path,
            line=mk.get("tags", line),
            field=f"{where}.tags",
        )
    tags = {str(t): _limits(v, f"{where}.tags.{t}", path, mk.get("tags", line), span) for t, v in tags_raw.items()}
    return Gate(name, metric, limits, severity, sig, tags, line)


def load_criteria(path: str | Path) -> Criteria:
    """Read and validate a ship-criteria YAML file."""
    from retbench.io.files import load_yaml_text

    p = Path(path)
    if not p.is_file():
        raise ConfigError("criteria file not found", path=p)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start}: {exc.reason})", path=p) from None
    return parse_criteria(load_yaml_text(text, p), str(p), text)
