"""Metric names: what a typed name means, and what the registry says about a metric by its name.

A metric name is parsed into a `MetricSpec`: a metric, an optional cutoff and parameters.
Accepted spellings (case-insensitive except trec_eval's own names):

- retbench names: `ndcg@10`, `P@5`, `recall@100`, `hit@5`, `f1@5`, `mrr`, `mrr@10`, `map`, `map@100`,
  `rprec`, `ndcg_exp@10`, `recall_any@5`, `recall_all@5`, `containment@5`, `hybrid@10(alpha=0.5,gamma=1)`,
  `judged@10` and `holes@10` (label coverage of the top k, metrics/coverage.py);
- a relevance level for binary measures: `recall@5(rel=2)` or ir_measures' `P(rel=2)@5`;
- trec_eval names: `ndcg_cut_10` (or `ndcg_cut.10`), `P_5`, `recall_100`, `success_5`, `map_cut_10`,
  `recip_rank`, `Rprec`, `map`, `ndcg`;
- the golden-set aliases `retrieval-hit-at-k`, `retrieval-recall-at-k`, `retrieval-mrr`,
  `retrieval-ndcg-at-k`, `answer-containment-at-k` (cutoff from the sample or `default_k`);
- answer metrics (metrics/answers.py, no cutoff): `exact_match`, `token_f1`, `bleu`, `rouge1`,
  `rouge2`, `rougeL`, `reference_containment`, `attribution`, `abstention_accuracy`,
  `hallucination_rate`, `negative_match`;
- LLM-judged answer metrics (metrics/judged.py, read from stored verdicts): `faithfulness`,
  `context_precision`, `context_recall`, `answer_relevance`, `groundedness`, `correctness`;
- rubric metrics (metrics/rubric.py): the shipped `coherence`, `relevance`, `helpfulness`, `harmlessness`,
  `factual_accuracy`, `answer_match`, and those a config declares under `rubrics:`.

A metric may give NaN for a query it does not apply to (an answer metric on an unanswerable question):
aggregates count only the queries it applies to. Cutoffs: a per-sample `metadata.k` wins, else the name's
own `@k`, else `default_k`; metrics uncut by nature (mrr, map, rprec, ndcg without @k) stay uncut unless given @k.

Which metrics exist (built-ins, plugins, `register()`) is metrics/catalog.py; adding one: docs/howto/plugins.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

import retbench.metrics.names as metric_names
import retbench.metrics.trec_params as trec_params
from retbench.errors import ConfigError, InputError
from retbench.metrics.base import Metric, MetricContext, MetricRow, row_of, trec_printed_name
from retbench.metrics.catalog import named, plugin_errors, trec_families, valid_names
from retbench.metrics.gain import check_level
from retbench.metrics.trec_rows import TREC_NICKNAMES, TREC_ORDER

#: the metric suite of a benchmark run (and of `retbench compare` on run files) when a config names none
DEFAULT_METRICS = ["ndcg@10", "recall@100", "mrr@10", "map", "recall@5", "P@5", "hit@5"]
#: what `retbench eval` and `retbench.evaluate` report on qrels when no metric is named: trec_eval's headline measures
EVAL_METRICS = ("ndcg@10", "recall@100", "map", "mrr", "P@10")
#: the answer metrics `retbench eval` adds when system outputs carry answers (BLEU/ROUGE need the answers extra)
DEFAULT_ANSWER_METRICS = [
    "exact_match",
    "token_f1",
    "reference_containment",
    "attribution",
    "abstention_accuracy",
    "hallucination_rate",
]


def lookup(name: str) -> Metric | None:
    """The metric a bare name stands for (a name, an alias or a trec_eval measure family), without a cutoff."""
    metric = named(name)
    if metric is not None:
        return metric
    return {f.lower(): m for f, (m, _) in trec_families().items()}.get(name.lower())


def trec_cut_families() -> dict[str, tuple[float, ...]]:
    """{trec_eval family of several measures: the values trec_eval computes when it is named bare}."""
    out: dict[str, tuple[float, ...]] = {}
    for fam, (m, plain) in trec_families().items():
        defaults = row_of(m).trec_defaults
        if not plain and defaults:
            out[fam] = defaults
    return out


def trec_order(name: str) -> tuple[int, float]:
    """Where trec_eval prints a measure given its printed name (`P_10`, `iprec_at_recall_0.10`): its
    family's place in trec_eval's measure table, then its parameter; unknown names sort last."""
    fams = trec_families()
    for fam in sorted(fams, key=len, reverse=True):
        if name == fam or name.startswith(fam + "_"):
            rest = name[len(fam) + 1 :]
            pos = TREC_ORDER.index(fam) if fam in TREC_ORDER else len(TREC_ORDER)
            try:
                return pos, float(rest.split(",")[0].split("=")[0]) if rest else -1.0
            except ValueError:
                continue
    return len(TREC_ORDER) + 1, 0.0


# golden-set aliases that mean "this metric at the resolved k" even when the metric is uncut by nature
_FORCE_K = {"retrieval-ndcg-at-k": "ndcg"}


@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric name: the metric, its own cutoff (None: uncut) and its parameters."""

    metric: Metric
    k: int | None
    params: Mapping[str, float]
    name: str  # canonical, e.g. "ndcg@10", "recall@5(rel=2)"

    def ks(self, sample_k: np.ndarray | None, n: int) -> np.ndarray | None:
        """Per-row cutoffs: a sample's own k wins over the spec's k; None for uncut metrics."""
        if self.k is None:
            return None
        k = np.full(n, self.k, dtype=np.int64)
        if sample_k is not None:
            k = np.where(sample_k > 0, sample_k, k)
        return k

    def compute(self, ctx: MetricContext, sample_k: np.ndarray | None = None) -> np.ndarray:
        values = np.asarray(self.metric.compute(ctx, self.ks(sample_k, len(ctx.gm)), self.params), dtype=np.float64)
        if values.shape != (len(ctx.gm),):
            raise ConfigError(f"metric {self.name!r} returned shape {values.shape}, expected ({len(ctx.gm)},)")
        return values

    @property
    def trec_name(self) -> str | None:
        """trec_eval's name for this measure (None when trec_eval has no such measure, or it has its own
        relevance level: trec_eval has one level for every measure)."""
        if "rel" in self.params:
            return None
        return trec_printed_name(self.row, self.k, self.params)

    @property
    def row(self) -> MetricRow:
        """The metric's declarations (`base.MetricRow`: unit, direction, range, trec_eval names, ...)."""
        return row_of(self.metric)

    @property
    def aggregate(self) -> str:
        """How the per-query values become one number (base.AGGREGATES); plugins default to the mean."""
        return self.row.aggregate


def _unknown(spec: str) -> ConfigError:
    names = ", ".join(valid_names())
    extra = "".join(f"; plugin {n!r} failed to load ({e})" for n, e in plugin_errors().items())
    return ConfigError(
        f"unknown metric {spec!r}; valid names: {names} (also trec_eval names such as ndcg_cut_10, P_5, "
        f"recip_rank, Rprec, success_5){extra}",
        field="metric",
    )


_UNDERSCORE_RE = re.compile(r"^((?:retrieval|answer)_[a-z_]+?)(?:_at_(\d+|k))?$")


def _underscore_spelling(s: str) -> str:
    """Gate configs may spell the aliases with underscores and the cutoff inline
    (`retrieval_recall_at_5`, `retrieval_mrr`); rewrite them to the alias form `retrieval-recall-at-k@5`."""
    m = _UNDERSCORE_RE.match(s.lower())
    if not m or named(s) is not None:  # a registered name (answer_relevance) is left as it is
        return s
    alias = m[1].replace("_", "-") + ("-at-k" if m[2] else "")
    return alias + (f"@{m[2]}" if m[2] and m[2].isdigit() else "")


def parse_metric(spec: str, default_k: int = 5) -> MetricSpec:
    """Parse a metric name (see the module docstring) into a MetricSpec; unknown names list the valid ones."""
    if default_k < 1:
        raise ConfigError(f"default_k must be >= 1, got {default_k}", field="default_k")
    s = _underscore_spelling(metric_names.rewrite(spec.strip().replace(" ", "")))
    trec = _parse_trec(s, spec, default_k, expand=False)
    if trec is not None:
        if len(trec) != 1:
            raise ConfigError(f"metric {spec!r} names {len(trec)} measures; give them as a list", field="metric")
        return trec[0]
    m = metric_names.SPEC.match(s)
    metric = named(m["name"]) if m else None
    if m is None or metric is None:
        raise _unknown(spec)
    key = m["name"].lower()
    k = int(m["k"]) if m["k"] is not None else None
    params = {**metric_names.parse_params(m["p1"], spec), **metric_names.parse_params(m["p2"], spec)}
    return _make_spec(metric, k, params, spec, default_k, force_k=key in _FORCE_K)


def _parse_trec(s: str, spec: str, default_k: int, *, expand: bool) -> list[MetricSpec] | None:
    """trec_eval's spelling, `FAMILY`, `FAMILY.v1,v2` or `FAMILY_v` (`P.5,10`, `ndcg_cut_10`,
    `iprec_at_recall.0.1`, `set_F.0.5`, `utility.2,-1,0,0`): the specs it names, None when it is not one.
    A bare family that is several measures (`ndcg_cut`) expands to trec_eval's defaults only with `expand`."""
    fams = trec_families()
    for fam in sorted(fams, key=len, reverse=True):
        metric, plain = fams[fam]
        if s == fam:
            if plain:
                return [_make_spec(metric, None, {}, spec, default_k)]
            if expand and (named(fam) is None or metric.cutoff == "none"):
                return [_trec_point(metric, v, spec, default_k) for v in row_of(metric).trec_defaults]
            return None
        if not (s.startswith(fam + ".") or s.startswith(fam + "_")):
            continue
        own = trec_params.variant(metric, fam, s[len(fam) + 1 :], spec) if s[len(fam)] == "." else None
        if own is not None:  # 11pt_avg's recall levels, a gain map: the measure trec_eval names so
            return [MetricSpec(own, None, {}, s)]
        values = s[len(fam) + 1 :].split(",")
        names = row_of(metric).trec_params
        try:
            nums = [float(v) for v in values]
        except ValueError:
            continue
        if len(names) > 1:
            if len(nums) != len(names):
                raise ConfigError(f"metric {spec!r}: {fam} takes {len(names)} values ({', '.join(names)})")
            return [_make_spec(metric, None, dict(zip(names, nums, strict=True)), spec, default_k)]
        return [_trec_point(metric, v, spec, default_k, truncate=s[len(fam)] == ".") for v in nums]
    return None


def _trec_point(metric: Metric, value: float, spec: str, default_k: int, *, truncate: bool = False) -> MetricSpec:
    """One measure of a trec_eval family: `value` is its cutoff, or its one parameter. `truncate`: a cutoff typed
    in `-m FAMILY.list` is read as trec_eval reads it, with C's atol (`ndcg_cut.23.4` is ndcg_cut_23)."""
    names = row_of(metric).trec_params
    if names:
        return _make_spec(metric, None, {names[0]: float(value)}, spec, default_k)
    if not np.isfinite(value) or (float(value) != int(value) and not truncate):
        raise ConfigError(f"metric {spec!r}: a cutoff must be a whole number, got {value:g}", field="metric")
    return _make_spec(metric, int(value), {}, spec, default_k)


def _make_spec(
    metric: Metric, k: int | None, params: dict[str, float], spec: str, default_k: int, *, force_k: bool = False
) -> MetricSpec:
    """Check a metric's cutoff and parameters and name the result canonically (`recall@5(rel=2)`)."""
    if "k" in params:
        if k is not None:
            raise ConfigError(f"metric {spec!r} gives its cutoff twice", field="metric")
        k = int(params.pop("k"))
    row = row_of(metric)
    defaults = dict(row.params)
    allowed = set(defaults) | ({"rel"} if row.binary else set())
    bad = set(params) - allowed
    if bad:
        have = ", ".join(sorted(allowed)) or "none"
        raise ConfigError(
            f"metric {spec!r}: unknown parameter(s) {', '.join(sorted(bad))} (accepted: {have})", field="metric"
        )
    if "rel" in params:
        try:
            check_level(params["rel"])
        except ValueError as exc:
            raise ConfigError(f"metric {spec!r}: {exc}", field="metric") from None
    cutoff = metric.cutoff
    if cutoff == "none" and k is not None:
        raise ConfigError(f"metric {metric.name!r} takes no cutoff (got {spec!r})", field="metric")
    if k is None and (cutoff == "k" or force_k):
        k = default_k
    if k is not None and not 1 <= k <= MAX_CUTOFF:
        raise ConfigError(f"metric {spec!r}: cutoff must be >= 1 and at most {MAX_CUTOFF}, got {k}", field="metric")
    for p, (lo, hi) in row.param_ranges.items():
        if p in params and not lo <= params[p] <= hi:
            raise ConfigError(f"metric {spec!r}: {p} must be in [{lo:g}, {hi:g}], got {params[p]:g}", field="metric")
    always = set(row.trec_params) if row.show_params else set()
    full = {**defaults, **params}
    shown = {p: v for p, v in full.items() if p == "rel" or p in always or v != defaults.get(p)}
    name = metric.name + (f"@{k}" if k is not None else "")
    if shown:
        name += "(" + ",".join(f"{p}={metric_names.number(v)}" for p, v in sorted(shown.items())) + ")"
    return MetricSpec(metric, k, full, name)


MAX_CUTOFF = 2**31 - 1  # a cutoff past any ranking's length; larger ones overflow the int64 arrays judging uses


def value_range(name: str) -> tuple[float, float] | None:
    """(low, high) of a metric's values when the metric declares them (all built-ins: 0 to 1)."""
    return parse_metric(name).row.value_range


def lower_is_better(name: str) -> bool:
    """Whether a smaller value of this metric is the better one (gates flip their checks for it)."""
    try:
        return parse_metric(name).row.lower_is_better
    except InputError:
        return False


#: lower-is-better measures of the labels' coverage of a ranking, not of the system (see `unanswered_value`)
JUDGEMENT_MEASURES = frozenset({"holes", "unj", "rbp_resid"})


def unanswered_value(metric: Metric) -> float | None:
    """What a failed or missing query scores on `metric` (a registry row): the metric's worst value.

    Missing is not good: 0 for a higher-is-better metric (trec_eval `-c`), the top of `value_range` for a
    lower-is-better one (hallucination_rate 1.0: a timed-out answer must not read as a faithful one).
    None for measures of the judgements alone (num_rel, num_q), which keep their value as trec_eval -c does.
    The measures of how far the labels cover a ranking (`JUDGEMENT_MEASURES`) are lower-is-better but describe the
    labels, not the system: an unanswered query scores 0 on them, as trec_eval -c scores unj and rbp_resid (and the
    incomplete-judgements warning reads them over the answered queries only).
    """
    row = row_of(metric)
    if row.keeps_unanswered:
        return None
    if metric.name in JUDGEMENT_MEASURES:
        return 0.0
    if row.lower_is_better:
        return (row.value_range or (0.0, 1.0))[1]
    return 0.0


def unanswered_value_of(name: str) -> float | None:
    """`unanswered_value` by metric name; 0 for a name the registry does not know (a table's own column)."""
    try:
        return unanswered_value(parse_metric(name).metric)
    except InputError:
        return 0.0


def parse_metrics(specs: Sequence[str], default_k: int = 5) -> list[MetricSpec]:
    """Parse several names; duplicates are dropped. trec_eval's forms name several measures at once: a
    comma list (`P.5,10`), a bare family of several measures (`ndcg_cut`, `iprec_at_recall`: trec_eval's
    defaults) and trec_eval's nicknames (`official`, `all_trec`, `set`: their families with defaults)."""
    out: list[MetricSpec] = []
    seen: set[str] = set()
    for spec in specs:
        for parsed in _expand(spec, default_k):
            if parsed.name not in seen:
                seen.add(parsed.name)
                out.append(parsed)
    return out


def _expand(spec: str, default_k: int) -> list[MetricSpec]:
    s = spec.strip().replace(" ", "")
    if s in TREC_NICKNAMES:
        fams = trec_families()
        out: list[MetricSpec] = []
        for fam in TREC_NICKNAMES[s]:
            if fam not in fams:  # runid, relstring (strings, not measures), or a family no row declares
                continue
            metric, plain = fams[fam]
            if plain:
                out.append(_make_spec(metric, None, {}, spec, default_k))
            else:
                out += [_trec_point(metric, v, spec, default_k) for v in row_of(metric).trec_defaults]
        return out
    return _parse_trec(s, spec, default_k, expand=True) or [parse_metric(spec, default_k)]


def trec_nickname_families() -> dict[str, tuple[str, ...]]:
    """trec_eval's nicknames and the measure families each stands for (those retbench computes)."""
    fams = trec_families()
    return {nick: tuple(f for f in members if f in fams) for nick, members in TREC_NICKNAMES.items()}
