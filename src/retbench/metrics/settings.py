"""How judged runs are counted and summarized: `EvalSettings`, the one place their defaults live.

`retbench.evaluation.evaluate` counts with these settings (its module docstring gives the rules);
the config loader parses the `evaluation:` block into them; an `Evaluation` gives back the settings
it was counted with. They sit below `evaluation` so that every layer above can name them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from numbers import Integral, Real
from typing import Any, Literal, get_args

from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject
from retbench.metrics.registry import MAX_CUTOFF

#: the counting modes and the policies for a query with nothing relevant (the config's `evaluation:` block
#: declares its fields with these Literals, so its schema and this module's checks name the same values)
Mode = Literal["trec_eval", "pytrec_eval"]
NoRelevant = Literal["skip", "zero", "one"]
MODES: tuple[str, ...] = get_args(Mode)
NO_RELEVANT: tuple[str, ...] = get_args(NoRelevant)
#: where recall level p of a query with R relevant documents falls (iprec_at_recall, 11pt_avg): `round` is
#: trec_eval 10.0's lround(p * R) (halves away from zero); `floor_plus_0.9` is trec_eval 9's and pytrec_eval's
#: (long)(p * R + 0.9)
RECALL_ROUNDINGS = ("round", "floor_plus_0.9")
#: the rule every result scored before trec_eval 10.0's existed in retbench was scored with (`Evaluation.from_tsv`)
LEGACY_ROUNDING = "floor_plus_0.9"

__all__ = [
    "MODES",
    "NO_RELEVANT",
    "RECALL_ROUNDINGS",
    "EvalSettings",
    "Mode",
    "NoRelevant",
    "checked_level",
    "with_overrides",
]


@dataclass(frozen=True)
class EvalSettings:
    """How runs are judged and summarized; the defaults here are the only defaults.

    relevance_level: the lowest grade that counts as relevant for binary measures (trec_eval `-l`);
    no_relevant: what to do with a query that has no relevant document (skip it, score it 0 or 1); None (the
    default) follows the mode: `skip` in the trec_eval mode (reported and left out), `zero` in the pytrec_eval
    mode, which counts it as pytrec_eval does (0 on measures that divide by the relevant count) and as BEIR
    averages it (over every query pytrec_eval returns);
    mode: trec_eval (retbench's engine) or pytrec_eval (the reference implementation);
    default_k: the cutoff of metrics named without one; bootstrap: resamples of the mean's CI;
    seed: of that bootstrap; ignore_identical_ids: drop a retrieved document whose id equals the
    query's, as BEIR's `EvaluateRetrieval.evaluate(..., ignore_identical_ids=True)` does by default (it decides
    ArguAna's and Quora's published numbers, where queries are documents too); None (the default) follows the
    mode: on in the pytrec_eval ("as BEIR") mode, off in the trec_eval mode, which drops nothing; judged_only: score
    the judged documents only, in their order (trec_eval `-J`, condensed lists); max_docs: the documents
    per query scored (trec_eval `-M`); collection_size: documents in the collection (trec_eval `-N`, read
    by utility); recall_rounding: where recall level p falls among a query's R relevant documents for
    iprec_at_recall and 11pt_avg (one of `RECALL_ROUNDINGS`); None (the default) follows the mode: trec_eval
    10.0's `round` in the trec_eval mode, trec_eval 9's `floor_plus_0.9` in the pytrec_eval mode.
    """

    relevance_level: int = 1
    no_relevant: str | None = None
    mode: str = "trec_eval"
    default_k: int = 5
    bootstrap: int = 1000
    seed: int = 0
    ignore_identical_ids: bool | None = None
    judged_only: bool = False
    max_docs: int | None = None
    collection_size: int | None = None
    recall_rounding: str | None = None

    def aggregate_kwargs(self) -> dict[str, int]:
        """The keyword arguments of `Evaluation.aggregate` these settings fix."""
        return {"seed": self.seed, "n_boot": self.bootstrap}

    @property
    def no_relevant_policy(self) -> str:
        """`no_relevant` resolved: as set, else by the mode (`zero` as pytrec_eval and BEIR count, else `skip`)."""
        if self.no_relevant is None:
            return "zero" if self.mode == "pytrec_eval" else "skip"
        return self.no_relevant

    @property
    def identical_ids_ignored(self) -> bool:
        """`ignore_identical_ids` resolved: as set, else by the mode (BEIR's default in its mode only)."""
        if self.ignore_identical_ids is None:
            return self.mode == "pytrec_eval"
        return bool(self.ignore_identical_ids)

    @property
    def recall_rule(self) -> str:
        """`recall_rounding` resolved: as set, else by the mode (trec_eval 10.0's `round`, pytrec_eval's 9 rule)."""
        if self.recall_rounding is None:
            return LEGACY_ROUNDING if self.mode == "pytrec_eval" else "round"
        return self.recall_rounding

    def to_dict(self) -> JSONObject:
        """The settings as recorded in manifests and fingerprints (identical ids resolved by the mode).

        trec_eval's -J/-M/-N options are left out while at their defaults, so results scored before they existed
        keep their fingerprints (a finished cell is not scored again after an upgrade that changed nothing); so is
        the recall rounding while it is the mode's own. A cell finished before trec_eval 10.0's rounding existed
        therefore keeps its stored iprec_at_recall and 11pt_avg values (trec_eval 9's rule), and its table, read
        back without a `recall_rounding` entry, says so (`Evaluation.from_tsv`)."""
        out = {
            **asdict(self),
            "ignore_identical_ids": self.identical_ids_ignored,
            "no_relevant": self.no_relevant_policy,
            "recall_rounding": self.recall_rule,
        }
        if self.recall_rule == replace(self, recall_rounding=None).recall_rule:
            del out["recall_rounding"]
        for name, default in _OPTION_DEFAULTS.items():
            if out[name] == default:
                del out[name]
        return out


#: how each counting mode reads in a report
MODE_LABELS = {
    "trec_eval": "trec_eval (all judged queries; unanswered count as 0)",
    "pytrec_eval": "pytrec_eval (answered queries only)",
}
SETTING_NAMES = frozenset(f.name for f in fields(EvalSettings))
#: settings added with trec_eval's -J/-M/-N, recorded only when set
_OPTION_DEFAULTS: dict[str, bool | None] = {"judged_only": False, "max_docs": None, "collection_size": None}


def with_overrides(settings: EvalSettings | None, overrides: Mapping[str, Any]) -> EvalSettings:
    """`settings` (default: the defaults) with settings given by name applied (`relevance_level=2`)."""
    unknown = sorted(set(overrides) - SETTING_NAMES)
    if unknown:
        raise TypeError(f"evaluate() got unexpected keyword argument(s): {', '.join(unknown)}")
    base = settings if settings is not None else EvalSettings()
    return replace(base, **overrides) if overrides else base


def checked_level(settings: EvalSettings) -> int:
    """Refuse an unknown mode or no-relevant policy; the relevance level as an integer >= 1, or 0 (trec_eval
    -l 0: every judged document, grade 0 included, counts as relevant for the binary measures)."""
    if settings.mode not in MODES:
        raise ConfigError(f"unknown mode {settings.mode!r}; expected one of {', '.join(MODES)}", field="mode")
    if settings.no_relevant_policy not in NO_RELEVANT:
        raise ConfigError(
            f"unknown no_relevant policy {settings.no_relevant!r}; expected one of {', '.join(NO_RELEVANT)}",
            field="no_relevant",
        )
    if settings.recall_rule not in RECALL_ROUNDINGS:
        raise ConfigError(
            f"unknown recall rounding {settings.recall_rounding!r}; expected one of {', '.join(RECALL_ROUNDINGS)}",
            field="recall_rounding",
        )
    for name in ("max_docs", "collection_size"):
        value = getattr(settings, name)
        if value is not None:
            whole(value, name, LIMITS[name])
    level = settings.relevance_level
    if isinstance(level, Integral) and not isinstance(level, bool) and level <= 0:
        if level == 0:
            return 0
        high = LIMITS["relevance_level"]
        raise ConfigError(
            f"relevance level must be a whole number from 0 to {high:,}, got {level}", field="relevance_level"
        )
    return whole(level, "relevance_level", LIMITS["relevance_level"], "relevance level")


#: the largest value each integer setting takes. A level or a depth past 2**31 - 1 is past every grade and every
#: ranking's length (and would overflow the int64 arithmetic judging does on them); a collection size is read as
#: a float (trec_eval's utility), exact to 2**53.
LIMITS = {"relevance_level": MAX_CUTOFF, "max_docs": MAX_CUTOFF, "collection_size": 2**53}


def whole(value: object, name: str, high: int, what: str | None = None) -> int:
    """`value` as an integer from 1 to `high`, or one ConfigError naming the setting and its range.

    A number (NumPy's too), never a bool or text; NaN and infinity are not integers; a value too large for
    a C long (`10**400`) gets this message rather than NumPy's OverflowError."""
    label = what or name
    ok = not isinstance(value, bool) and isinstance(value, Real)
    if ok and not isinstance(value, Integral):
        ok = math.isfinite(float(value)) and float(value).is_integer()  # type: ignore[arg-type]
    if not ok or not 1 <= value <= high:  # type: ignore[operator]
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:20]}... ({len(repr(value))} characters)"
        raise ConfigError(f"{label} must be a whole number from 1 to {high:,}, got {shown}", field=name)
    return int(value)  # type: ignore[call-overload]
