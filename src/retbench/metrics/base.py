"""What a metric is: the Metric protocol, the context every metric reads, and the built-in row type.

The metric modules (`retrieval`, `answers`, `judged`) declare their rows as `Builtin`s over a
`MetricContext`; the catalog (`metrics/catalog.py`) collects those rows and `metrics/registry.py` parses names.
Keeping these types here, below all of them, is what lets the catalog import the metric modules without a cycle.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

import numpy as np

from retbench.errors import ConfigError
from retbench.metrics.gain import GainMatrix

CUTOFFS = ("k", "optional", "none")
#: how a metric's per-query values become its one number, as trec_eval's `all` line does:
#: mean; gmean: the geometric mean of max(value, MIN_GEO_MEAN) (trec_eval's gm_map, gm_bpref);
#: sum: the total over queries (trec_eval's num_ret, num_rel, ...; num_q sums a 1 per query: the count)
AGGREGATES = ("mean", "gmean", "sum")
#: how reports print a metric: "share" (a fraction of documents or queries: recall, precision, hit rate) reads as a
#: percentage and its changes in percentage points; "score" (MRR, nDCG, MAP, ...) as a decimal
UNITS = ("score", "share")
MIN_GEO_MEAN = 1e-5  # trec_eval's floor under a geometric mean (trec_eval.h MIN_GEO_MEAN)


@dataclass
class MetricContext:
    """Everything a metric may look at, row-aligned with the gain matrix.

    `run_rows[i]` is the run's row for gain-matrix row i (-1: the system did not answer);
    `samples[i]` is the golden-set sample of row i, if any; `texts` maps doc id -> text (or is a Corpus);
    `answers` maps query id -> the system's `SystemAnswer` (the answer side of a RAG system).
    """

    gm: GainMatrix
    relevance_level: int = 1
    run: Any = None
    run_rows: np.ndarray | None = None
    samples: Sequence[Any] = field(default_factory=list)
    texts: Any = None
    qrels: Mapping[str, Mapping[str, int]] | None = None
    answers: Mapping[str, Any] | None = None
    judged: Mapping[str, Any] | None = None  # query id -> stored judge verdicts (metrics/judged.py)
    # a passage judge's gold items (metrics/judges/common.Judgement): recall, recall_any, recall_all and f1
    # count the gold items matched rather than relevant chunks when it is there
    items: Any = None
    collection_size: int | None = None  # documents in the collection (trec_eval -N; utility's d term)
    # where recall level p falls among R relevant documents (iprec_at_recall, 11pt_avg): settings.RECALL_ROUNDINGS
    recall_rounding: str = "round"
    # query id -> "is this doc id inside the scope the system chose?" (retrievers/scope.py; None: scoping off)
    scopes: Mapping[str, Callable[[str], bool]] | None = None
    # subtopic qrels (metrics/judges/subtopics.SubtopicQrels) given beside ordinary qrels, as the TREC Web
    # track ships ad-hoc and diversity qrels apart: the diversity measures read these, every other metric `qrels`
    subtopics: Any = None

    def level(self, params: Mapping[str, float]) -> int:
        """The relevance level a binary measure uses: its own `rel=` parameter, else the evaluation's."""
        level = params.get("rel", self.relevance_level)
        if int(level) != level:
            raise ConfigError(f"relevance level must be an integer, got {level!r}", field="rel")
        return int(level)

    def ranked(self, i: int, k: int | None = None) -> list[str]:
        """Doc ids ranked for row i (rank 1 first), at most k of them."""
        if self.run is None or self.run_rows is None or self.run_rows[i] < 0:
            return []
        r = int(self.run_rows[i])
        start, stop = int(self.run.offsets[r]), int(self.run.offsets[r + 1])
        if k is not None:
            stop = min(stop, start + k)
        return self.run.doc_ids[start:stop].tolist()


@runtime_checkable
class Metric(Protocol):
    """What a metric is: a name, how it takes a cutoff, and a vectorized compute.

    `cutoff`: "k" (needs a cutoff: per-sample k, else the name's @k, else default_k), "optional"
    (uncut unless the name has @k) or "none". `compute` returns one float per gain-matrix row;
    `k` is None (uncut) or an int64 array of per-row cutoffs. Everything else a metric may declare
    (`unit`, `lower_is_better`, `keeps_unanswered`, ...) is a field of `MetricRow`, with the default a
    metric that does not declare it gets; the registry reads them through `row_of`.
    """

    @property
    def name(self) -> str: ...  # read-only: a frozen dataclass or a property satisfies it

    @property
    def cutoff(self) -> str: ...

    def compute(self, ctx: MetricContext, k: np.ndarray | None, params: Mapping[str, float]) -> np.ndarray: ...


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True)
class MetricRow:
    """What a metric may declare beside the protocol's `name`, `cutoff` and `compute`, each with the default a
    metric that leaves it out gets. A plugin declares any of them as attributes (or properties) of the object it
    registers; `row_of(metric)` reads them, the one place that does, and `catalog.register` checks them. The
    generated metrics reference and the plugin how-to list these fields from this declaration."""

    aliases: tuple[str, ...] = field(default=(), metadata=_doc("other names it answers to (case-insensitive)"))
    params: Mapping[str, float] = field(default_factory=dict, metadata=_doc("its parameters: name -> default value"))
    binary: bool = field(default=True, metadata=_doc("counts grades at or above a relevance level: accepts `rel=`"))
    description: str = field(default="", metadata=_doc("its definition, as the reference prints it"))
    label: str = field(default="", metadata=_doc('how reports name it ("nDCG", "hit rate"); the name when empty'))
    meaning: str = field(default="", metadata=_doc("one plain sentence for readers; `{k}` stands for the cutoff"))
    unit: str = field(
        default="score", metadata=_doc('"share" prints as a percentage (changes in pp), "score" as a decimal')
    )
    value_range: tuple[float, float] | None = field(
        default=None, metadata=_doc("(low, high) of its values: thresholds and confidence sequences use it")
    )
    lower_is_better: bool = field(
        default=False, metadata=_doc("a smaller value is better: gates cap it, ranks and tuning flip for it")
    )
    answer_side: bool = field(
        default=False, metadata=_doc("scores the answer, not the ranking: it applies to unanswerable questions")
    )
    keeps_unanswered: bool = field(
        default=False, metadata=_doc("a measure of the judgements alone: a failed query keeps its value")
    )
    aggregate: str = field(default="mean", metadata=_doc("how per-query values become one number: mean, gmean, sum"))
    param_ranges: Mapping[str, tuple[float, float]] = field(
        default_factory=dict, metadata=_doc("parameter -> (low, high), checked when the name is parsed")
    )
    per_query_line: bool = field(default=True, metadata=_doc("`eval -f trec -q` prints a line per query for it"))
    trec: str | None = field(default=None, metadata=_doc("trec_eval's name for it uncut, at its defaults"))
    trec_cut: str | None = field(default=None, metadata=_doc('trec_eval\'s name template with a cutoff ("P_{k}")'))
    trec_family: str | None = field(default=None, metadata=_doc("trec_eval's measure family (`-m FAMILY.params`)"))
    trec_params: tuple[str, ...] = field(
        default=(), metadata=_doc("the parameters trec_eval's `FAMILY.v1,v2` list sets (none: the list is cutoffs)")
    )
    trec_defaults: tuple[float, ...] = field(
        default=(), metadata=_doc("the values trec_eval computes when the family is named bare")
    )
    show_params: bool = field(default=False, metadata=_doc("its canonical name always shows its parameters"))
    trec_name: Callable[[int | None, Mapping[str, float]], str | None] | None = field(
        default=None, metadata=_doc("trec_eval's printed name for (k, params), or None; `trec_name(k)` also works")
    )


#: how a declared value is read: containers a plugin may give as lists become tuples or dicts
_AS: dict[str, Callable[[Any], Any]] = {
    "aliases": lambda v: tuple(str(a) for a in v),
    "params": dict,
    "param_ranges": dict,
    "trec_params": lambda v: tuple(str(p) for p in v),
    "trec_defaults": lambda v: tuple(float(x) for x in v),
    "value_range": lambda v: (float(v[0]), float(v[1])),
    "trec_name": lambda v: v if callable(v) else None,
    **{
        n: bool
        for n in ("binary", "lower_is_better", "answer_side", "keeps_unanswered", "per_query_line", "show_params")
    },
    **{n: str for n in ("description", "label", "meaning", "unit", "aggregate", "trec", "trec_cut", "trec_family")},
}
ROW_FIELDS = tuple(f.name for f in fields(MetricRow))


def row_of(metric: Metric) -> MetricRow:
    """A metric's declarations: each `MetricRow` field it declares (None or absent: the default).

    Raises ConfigError naming the field when a declared value has the wrong shape (a range that is not two numbers).
    """
    given: dict[str, Any] = {}
    for name in ROW_FIELDS:
        value = getattr(metric, name, None)  # the one read of a metric's optional declarations
        if value is None:
            continue
        try:
            given[name] = _AS[name](value)
        except (TypeError, ValueError, IndexError, KeyError) as exc:
            raise ConfigError(f"metric {metric.name!r} declares {name} = {value!r} ({exc})", field=name) from None
    return MetricRow(**given)


def checked_row(metric: Metric) -> MetricRow:
    """The metric's declarations, refused by field when one is of the wrong kind (what `register` checks)."""
    row = row_of(metric)
    where = f"metric {metric.name!r}"
    if row.unit not in UNITS:
        raise ConfigError(f"{where}: unit must be one of {', '.join(UNITS)}, got {row.unit!r}", field="unit")
    if row.aggregate not in AGGREGATES:
        raise ConfigError(f"{where}: aggregate must be one of {', '.join(AGGREGATES)}, got {row.aggregate!r}", field="aggregate")  # fmt: skip
    if row.value_range is not None and not row.value_range[0] <= row.value_range[1]:
        raise ConfigError(f"{where}: value_range must be (low, high) with low <= high, got {row.value_range}", field="value_range")  # fmt: skip
    return row


def trec_printed_name(row: MetricRow, k: int | None, params: Mapping[str, float]) -> str | None:
    """trec_eval's printed name from a row's `trec_name`: called with (k, params), or, when it takes k alone (a
    plugin's `trec_name(k)`), with k for the measure at its default parameters only."""
    fn = row.trec_name
    if fn is None:
        return None
    try:
        inspect.signature(fn).bind(None, {})
    except TypeError:
        return None if params else fn(k)  # type: ignore[call-arg]
    except ValueError:  # no signature to read (a C function): called as declared
        pass
    return fn(k, params)


@dataclass(frozen=True)
class Builtin:
    """A metric defined by a function of (context, per-row k, relevance level, params)."""

    name: str
    cutoff: str
    fn: Callable[[MetricContext, np.ndarray | None, int, Mapping[str, float]], np.ndarray]
    description: str
    aliases: tuple[str, ...] = ()
    binary: bool = True
    params: Mapping[str, float] = field(default_factory=dict)
    trec: str | None = None  # trec_eval's name when uncut
    trec_cut: str | None = None  # trec_eval's name with a cutoff, "{k}" filled in
    value_range: tuple[float, float] = (0.0, 1.0)  # every built-in metric is a fraction
    param_ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # checked when the name is parsed
    answer_side: bool = False  # scores the answer (metrics/answers.py), not the ranking
    lower_is_better: bool = False  # a rate of errors (hallucination_rate): gates cap it and a rise is a regression
    label: str = ""  # how reports name it ("nDCG", "MRR", "hit rate"); the name itself when empty
    meaning: str = ""  # one plain sentence for readers who are not IR people; "{k}" stands for the cutoff
    aggregate: str = "mean"  # one of AGGREGATES: how trec_eval's `all` line sums it up
    # trec_eval's identity: its measure family (`-m FAMILY.params`), the parameters its `.params` list sets
    # (none: the list is cutoffs), and the values it computes when the family is named bare
    trec_family: str | None = None
    trec_params: tuple[str, ...] = ()
    trec_defaults: tuple[float, ...] = ()
    show_params: bool = False  # the canonical name always shows the parameters (a point of a family: recall=0.1)
    per_query_line: bool = True  # trec_eval -q prints a line per query (not for gm_* and num_q)
    keeps_unanswered: bool = False  # true of measures of the judgements alone (num_rel, num_q): unanswered keep them
    unit: str = "score"  # one of UNITS

    def compute(self, ctx: MetricContext, k: np.ndarray | None, params: Mapping[str, float]) -> np.ndarray:
        return self.fn(ctx, k, ctx.level(params) if self.binary else 1, params)

    def trec_name(self, k: int | None, params: Mapping[str, float] | None = None) -> str | None:
        """trec_eval's printed name: `trec` when uncut and at its defaults, else `trec_cut` filled in."""
        given = {p: v for p, v in (params or {}).items() if p != "rel"}
        at_defaults = all(given.get(p, d) == d for p, d in self.params.items())
        if k is None and at_defaults and self.trec:
            return self.trec
        if self.trec_cut and (k is not None or self.params):
            return self.trec_cut.format(k=k, **{**self.params, **given})
        return None
