"""Which fusions and normalisations exist, their ranx spellings, and the check of a fusion's options.

The vocabulary's names come from the config model (config/experiment.py's `FusionName` and `NormalizationName`,
which the loader validates and the JSON Schema publishes); retrievers/fusion.py implements each and its module
docstring gives the formulas. `fusion_problem` is run when a config loads, so a bad option is refused before any
work rather than failing every query.
"""

from __future__ import annotations

import math
from typing import get_args

from retbench.config.experiment import MAX_FUSION_WEIGHT, MAX_RRF_K, FusionName, NormalizationName

NORMALIZATIONS: tuple[str, ...] = get_args(NormalizationName)
#: ranx's spellings of the same normalisations
NORMALIZATION_ALIASES = {"min-max": "minmax", "min_max": "minmax", "zmuv": "zscore"}

#: methods whose result depends only on each system's ranks
RANK_BASED = ("rrf", "isr", "log_isr", "logn_isr", "rbc", "borda", "weighted_borda", "condorcet", "weighted_condorcet")
FUSIONS: tuple[str, ...] = get_args(FusionName)
SCORE_BASED = tuple(m for m in FUSIONS if m not in RANK_BASED)
#: ranx's method names (`ranx.fuse(method=...)`) for the same fusions
FUSION_ALIASES = {
    "sum": "combsum",
    "mnz": "combmnz",
    "anz": "combanz",
    "gmnz": "combgmnz",
    "max": "combmax",
    "min": "combmin",
    "med": "combmed",
    "bordafuse": "borda",
    "w_bordafuse": "weighted_borda",
    "w_condorcet": "weighted_condorcet",
}
#: the methods that read per-system weights (the others refuse weights other than 1)
WEIGHTED = ("rrf", "weighted", "wsum", "wmnz", "mixed", "weighted_borda", "weighted_condorcet")
#: each method's own parameter and its default (None: the method has no default and needs it)
METHOD_PARAMS: dict[str, tuple[str, float | None]] = {
    "combgmnz": ("gamma", None),
    "logn_isr": ("sigma", 0.01),
    "rbc": ("phi", 0.8),
}
#: each method parameter's valid values: (low, high, whether the ends are allowed)
PARAM_RANGES: dict[str, tuple[float, float, bool]] = {
    "gamma": (-100.0, 100.0, True),  # |R(d)|^gamma: a wider exponent overflows
    "sigma": (0.0, 1e6, False),
    "phi": (0.0, 1.0, False),  # RBC's persistence: (1 - phi) phi^(r - 1) is a distribution only for 0 < phi < 1
}


def canonical_fusion(name: str) -> str:
    """The method's retbench name for a retbench or ranx spelling; a ValueError lists the valid ones."""
    method = FUSION_ALIASES.get(name, name)
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {name!r}; expected one of {', '.join(FUSIONS)} (or ranx's names)")
    return method


def canonical_normalization(name: str | None) -> str:
    """The normalisation's retbench name (None means `none`)."""
    norm = "none" if name is None else NORMALIZATION_ALIASES.get(name, name)
    if norm not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {name!r}; expected one of {', '.join(NORMALIZATIONS)}")
    return norm


def method_param(method: str, param: float | None) -> float:
    """The method's own parameter (gamma, sigma or phi), its default where it has one."""
    if method not in METHOD_PARAMS:
        return 0.0
    name, default = METHOD_PARAMS[method]
    value = default if param is None else param
    if value is None:
        raise ValueError(f"{method} needs its {name} (param)")
    if not math.isfinite(value):
        raise ValueError(f"{method}'s {name} must be a finite number, got {value!r}")
    return float(value)


def _number_problem(value: object, low: float, high: float, closed: bool = True) -> str | None:
    """Why `value` is not a finite number in [low, high] (or (low, high) when not `closed`), or None. A number
    written as text is read as one, as the fusion always has (YAML 1.1 reads `1e308`, with no dot, as text)."""
    try:
        number = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None:
        return f"must be a number, got {value!r:.40}"
    if not math.isfinite(number):
        return f"must be a finite number, got {value!r:.40}"
    inside = low <= number <= high if closed else low < number < high
    if not inside:
        ends = f"[{low:g}, {high:g}]" if closed else f"({low:g}, {high:g})"
        return f"must be in {ends}, got {value!r:.40}"
    return None


def fusion_problem(
    fusion: object = "rrf",
    *,
    weights: object = None,
    rrf_k: object = 60,
    normalization: object = "minmax",
    param: object = None,
    n: int | None = None,
) -> tuple[str, str] | None:
    """(field, reason) of the first fusion option a run would fail on, or None: checked when a config loads so a
    bad option is refused before any work rather than failing every query.

    The rules: `fusion` and `normalization` are names of this module; each weight is a finite number in
    [0, MAX_FUSION_WEIGHT], at least one above 0, one per ranking (`n`), and only a weighted method
    (`WEIGHTED`) takes weights other than 1; `rrf_k` is a finite number in [0, MAX_RRF_K]; the method's
    parameter is within `PARAM_RANGES`. Field names are the option's (`weights[1]`), for the caller to prefix.
    """
    if not isinstance(fusion, str):
        return "fusion", f"must be a method name, got {fusion!r:.40}"
    try:
        method = canonical_fusion(fusion)
    except ValueError as exc:
        return "fusion", str(exc)
    if not isinstance(normalization, (str, type(None))):
        return "normalization", f"must be a normalization name, got {normalization!r:.40}"
    try:
        canonical_normalization(normalization)
    except ValueError as exc:
        return "normalization", str(exc)
    reason = _number_problem(rrf_k, 0.0, MAX_RRF_K)
    if reason:
        return "rrf_k", reason
    if weights is not None:
        listed = isinstance(weights, (list, tuple))
        values: list[object] = list(weights) if isinstance(weights, (list, tuple)) else [weights]
        if listed and n is not None and len(values) != n:
            return "weights", f"has {len(values)} entries for {n} rankings"
        for i, w in enumerate(values):
            reason = _number_problem(w, 0.0, MAX_FUSION_WEIGHT)
            if reason:
                return (f"weights[{i}]" if listed else "weights"), reason
        numbers = [float(w) for w in values]  # type: ignore[arg-type]  # each checked above
        if numbers and all(w == 0 for w in numbers):
            return "weights", "at least one weight must be above 0 (all zero leaves nothing to rank by)"
        if method not in WEIGHTED and any(w != 1 for w in numbers):
            return "weights", f"{method} takes no weights; weighted methods: {', '.join(WEIGHTED)}"
    if method in METHOD_PARAMS:
        name, default = METHOD_PARAMS[method]
        value = default if param is None else param
        if value is None:
            return "param", f"{method} needs its {name} (param)"
        low, high, closed = PARAM_RANGES[name]
        reason = _number_problem(value, low, high, closed)
        if reason:
            return "param", f"{method}'s {name} {reason}"
    return None
