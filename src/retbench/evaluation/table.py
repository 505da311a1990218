"""The per-query table of one system (`Evaluation`): lookups, aggregates with bootstrap intervals, group
breakdowns, and its TSV/JSON forms. The counting rules that fill it are in the package docstring."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data.status import STATUSES
from retbench.errors import ConfigError
from retbench.estimates import llm_estimate
from retbench.io.files import json_safe
from retbench.io.tables import read_table, write_table
from retbench.metrics.aggregate import aggregate_kind, aggregate_kinds, from_means, summarize, to_means
from retbench.metrics.judged import JUDGED_METRICS
from retbench.metrics.registry import parse_metric
from retbench.metrics.settings import LEGACY_ROUNDING, MODE_LABELS, EvalSettings
from retbench.stats.paired import bootstrap_means


def canonical_name(metric: str, default_k: int) -> str:
    """The name a table stores `metric` under (`AP` -> `map`, `nDCG@10` -> `ndcg@10`); unknown names unchanged."""
    try:
        return parse_metric(metric, default_k).name
    except ConfigError:
        return metric


class Means(dict[str, float]):
    """{metric: value} keyed by the stored names, that also answers to any spelling of them.

    A user who asked for `AP` reads `means()["AP"]`, though the table stores trec_eval's `map`: the lookup
    goes through the registry's parsed names, so it cannot drift from what `evaluate` computed.
    """

    def __init__(self, items: Iterable[tuple[str, float]], default_k: int) -> None:
        super().__init__(items)
        self.default_k = default_k

    def __missing__(self, metric: str) -> float:
        name = canonical_name(metric, self.default_k)
        if name != metric and super().__contains__(name):
            return super().__getitem__(name)
        raise KeyError(metric)

    def __contains__(self, metric: object) -> bool:
        if super().__contains__(metric):
            return True
        return isinstance(metric, str) and super().__contains__(canonical_name(metric, self.default_k))

    def get(self, metric: str, default: float | None = None) -> float | None:  # type: ignore[override]
        try:
            return self[metric]
        except KeyError:
            return default


@dataclass
class Evaluation:
    """Per-query metric values for one system, with everything needed to read them honestly."""

    system: str
    metrics: list[str]
    query_ids: list[str]
    values: np.ndarray
    status: list[str]
    skipped: list[str] = field(default_factory=list)
    mode: str = "trec_eval"
    n_duplicates: int = 0
    excluded: list[str] = field(default_factory=list)  # judged but not counted (pytrec_eval mode: unanswered)
    unjudged: list[str] = field(default_factory=list)  # answered but not in the qrels (ignored)
    relevance_level: int = 1
    no_relevant: str = "skip"
    default_k: int = 5
    trec_names: list[str | None] = field(default_factory=list)
    ignore_identical_ids: bool = False
    n_identical: int = 0  # retrieved documents dropped because their id equals their query's (BEIR's rule)
    judged_only: bool = False  # trec_eval -J: scored over the judged documents only
    max_docs: int | None = None  # trec_eval -M
    collection_size: int | None = None  # trec_eval -N
    # `coverage(ev, run)` as the cell runner stored it in metrics.json, attached when the table is read
    # back (results directory, history) or scored from a run file; empty for a table built in Python
    coverage: dict[str, Any] = field(default_factory=dict)
    # a judged metric's `estimate` entry from a stage that holds human verdicts too (prediction-powered:
    # studies/rubrics.py), in place of the LLM-only entry `aggregate` gives it otherwise
    estimates: dict[str, dict[str, Any]] = field(default_factory=dict)
    # of the `n_identical` dropped (query, doc) pairs, those the qrels judge relevant: BEIR's rule then drops a
    # relevant document (on ArguAna or Quora a public qrels file can judge a query's own id relevant)
    n_identical_relevant: int = 0
    # where recall level p fell among R relevant documents (iprec_at_recall, 11pt_avg; settings.RECALL_ROUNDINGS):
    # a table read back without it predates trec_eval 10.0's rule and used trec_eval 9's
    recall_rounding: str = "round"

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=np.float64).reshape(len(self.query_ids), len(self.metrics))
        if len(self.status) != len(self.query_ids):
            raise ValueError("status must have one entry per query")
        if not self.trec_names:
            self.trec_names = [None] * len(self.metrics)

    # -- lookup -------------------------------------------------------------------------------------
    def _index(self, metric: str) -> int:
        if metric in self.metrics:
            return self.metrics.index(metric)
        name = canonical_name(metric, self.default_k)
        if name in self.metrics:
            return self.metrics.index(name)
        raise KeyError(f"metric {metric!r} was not computed (have: {', '.join(self.metrics)})")

    def column(self, metric: str) -> np.ndarray:
        """Per-query values of one metric, in `query_ids` order (accepts any spelling of the name)."""
        return self.values[:, self._index(metric)]

    def aggregates(self) -> list[str]:
        """Each metric's aggregate kind (metrics/aggregate.py): mean, gmean (gm_map, gm_bpref) or sum (num_*)."""
        return aggregate_kinds(self.metrics, self.default_k)

    def mean(self, metric: str) -> float:
        """The metric's one number over the counted queries it applies to, as trec_eval's `all` line gives it:
        the mean for almost every metric, the geometric mean for gm_*, the sum for num_* (NaN when none apply)."""
        j = self._index(metric)
        return float(summarize(self.values[:, j : j + 1], [aggregate_kind(self.metrics[j], self.default_k)])[0])

    def applicable(self) -> dict[str, int]:
        """{metric: how many counted queries it applies to} (answer metrics skip some; see metrics/answers.py)."""
        counts = np.count_nonzero(~np.isnan(self.values), axis=0)
        return {m: int(c) for m, c in zip(self.metrics, counts.tolist(), strict=True)}

    def means(self) -> Means:
        """{metric: mean over the counted queries}, keyed by the stored names; any spelling reads it back.

        >>> from retbench.data import Run
        >>> from retbench.evaluation import evaluate
        >>> ev = evaluate(Run.from_dict({"q1": {"d1": 1.0, "d2": 0.5}}), {"q1": {"d2": 1}}, ["mrr", "AP"])
        >>> ev.means()
        {'mrr': 0.5, 'map': 0.5}
        >>> ev.means()["AP"]
        0.5
        """
        pairs = zip(self.metrics, summarize(self.values, self.aggregates()).tolist(), strict=True)
        return Means(pairs, self.default_k)

    def settings(self) -> EvalSettings:
        """The settings this table was counted with (to score another run of the same queries the same way)."""
        return EvalSettings(
            relevance_level=self.relevance_level,
            no_relevant=self.no_relevant,
            mode=self.mode,
            default_k=self.default_k,
            ignore_identical_ids=self.ignore_identical_ids,
            judged_only=self.judged_only,
            max_docs=self.max_docs,
            collection_size=self.collection_size,
            recall_rounding=self.recall_rounding,
        )

    @property
    def label(self) -> str:
        """How queries were counted, for every rendered output."""
        return MODE_LABELS.get(self.mode, self.mode)

    def status_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for s in self.status:
            counts[s] = counts.get(s, 0) + 1
        return counts

    # -- aggregation -----------------------------------------------------------------------------------
    def aggregate(
        self, *, ci: bool = True, seed: int = 0, n_boot: int = 1000, confidence: float = 0.95
    ) -> dict[str, dict[str, Any]]:
        """{metric: {"mean", "ci_low", "ci_high", "n"}}: percentile bootstrap over queries (CIs only when ci=True).

        "mean" is the metric's aggregate (`Evaluation.mean`); a metric summed up otherwise than by its mean
        (gm_map: geometric mean; num_rel: sum) says so in its "aggregate" entry, and its interval is that
        aggregate's (metrics/aggregate.py).

        A metric that applies to only some queries (NaN elsewhere) is averaged over those: its `n`
        is that count and `of` the number of counted queries. An LLM-judged answer metric also carries
        its `estimate` entry (source `llm`, see `label_estimates`): no human labels exist for it to correct.
        """
        n = len(self.query_ids)
        out: dict[str, dict[str, Any]] = {}
        kinds = self.aggregates()
        means = summarize(self.values, kinds)
        applies = self.applicable()
        counts = np.array([applies[m] for m in self.metrics])
        lows = highs = None
        if ci and n:
            tail = (1.0 - confidence) / 2.0
            lows, highs = np.full(len(self.metrics), np.nan), np.full(len(self.metrics), np.nan)
            base = to_means(self.values, kinds)  # the bootstrap resamples means; each aggregate maps from one
            partial = [j for j, m in enumerate(self.metrics) if applies[m] != n]
            full = [j for j in range(len(self.metrics)) if j not in partial]
            if full:  # resampled together, as before answer metrics existed
                boot = bootstrap_means(base[:, full], n_boot=n_boot, seed=seed)
                q = np.quantile(boot, [tail, 1.0 - tail], axis=0)
                k_full = [kinds[j] for j in full]
                lows[full] = from_means(q[0], k_full, counts[full])
                highs[full] = from_means(q[1], k_full, counts[full])
            for j in partial:  # resampled over the queries the metric applies to
                col = base[:, j][~np.isnan(base[:, j])]
                if col.size:
                    boot = bootstrap_means(col[:, None], n_boot=n_boot, seed=seed)
                    q = np.quantile(boot[:, 0], [tail, 1.0 - tail])
                    lows[j], highs[j] = from_means(q[:, None], [kinds[j]], counts[j : j + 1])[:, 0]
        for j, m in enumerate(self.metrics):
            row: dict[str, Any] = {"mean": float(means[j]), "n": applies[m]}
            if kinds[j] != "mean":
                row["aggregate"] = kinds[j]
            if applies[m] != n:
                row["of"] = n
            if ci:
                row["ci_low"] = float(lows[j]) if lows is not None else float("nan")
                row["ci_high"] = float(highs[j]) if highs is not None else float("nan")
            if m in JUDGED_METRICS:
                row["estimate"] = self.estimates.get(m) or llm_estimate(self.values[:, j])
            out[m] = row
        return out

    def breakdown(self, groups: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
        """Mean of every metric over each group of query ids (e.g. a tag's samples); ids not counted are ignored."""
        pos = {q: i for i, q in enumerate(self.query_ids)}
        out: dict[str, dict[str, float]] = {}
        for tag, qids in groups.items():
            rows = [pos[q] for q in qids if q in pos]
            means = summarize(self.values[rows], self.aggregates())
            out[tag] = {m: float(means[j]) for j, m in enumerate(self.metrics)}
        return out

    def group_sizes(self, groups: Mapping[str, Sequence[str]]) -> dict[str, int]:
        """How many counted queries each group has (the n behind `breakdown`)."""
        pos = set(self.query_ids)
        return {tag: sum(q in pos for q in qids) for tag, qids in groups.items()}

    def subset(self, query_ids: Iterable[str]) -> Evaluation:
        """The same evaluation restricted to some counted queries (in the given order)."""
        pos = {q: i for i, q in enumerate(self.query_ids)}
        rows = [pos[q] for q in query_ids if q in pos]
        return Evaluation(
            self.system,
            list(self.metrics),
            [self.query_ids[r] for r in rows],
            self.values[rows],
            [self.status[r] for r in rows],
            list(self.skipped),
            self.mode,
            self.n_duplicates,
            list(self.excluded),
            list(self.unjudged),
            self.relevance_level,
            self.no_relevant,
            self.default_k,
            list(self.trec_names),
            self.ignore_identical_ids,
            self.n_identical,
            self.judged_only,
            self.max_docs,
            self.collection_size,
            n_identical_relevant=self.n_identical_relevant,
            recall_rounding=self.recall_rounding,
        )

    def select(self, metrics: Sequence[str]) -> Evaluation:
        """The same evaluation with only some metric columns (in the given order)."""
        cols = [self._index(m) for m in metrics]
        return replace(
            self,
            metrics=[self.metrics[j] for j in cols],
            values=np.ascontiguousarray(self.values[:, cols]),  # row-major as `evaluate` builds it: same means
            trec_names=[self.trec_names[j] for j in cols],
        )

    # -- serialization ---------------------------------------------------------------------------------
    def per_query(self) -> list[dict[str, Any]]:
        """One row per counted query: {"query_id", "status", metric: value, ...}."""
        return [
            {"query_id": q, "status": s, **{m: float(v) for m, v in zip(self.metrics, row, strict=True)}}
            for q, s, row in zip(self.query_ids, self.status, self.values.tolist(), strict=True)
        ]

    def to_dict(self, *, per_query: bool = False, ci: bool = True, seed: int = 0) -> dict[str, Any]:
        """JSON-ready summary: counting mode, statuses, skipped queries, aggregates (and the per-query table)."""
        out: dict[str, Any] = {
            "system": self.system,
            "mode": self.mode,
            "mode_label": self.label,
            "relevance_level": self.relevance_level,
            "no_relevant": self.no_relevant,
            "ignore_identical_ids": self.ignore_identical_ids,
            **({"n_identical": self.n_identical} if self.ignore_identical_ids else {}),
            **({"n_identical_relevant": self.n_identical_relevant} if self.n_identical_relevant else {}),
            **({"judged_only": True} if self.judged_only else {}),
            **({"max_docs": self.max_docs} if self.max_docs is not None else {}),
            **({"collection_size": self.collection_size} if self.collection_size is not None else {}),
            "recall_rounding": self.recall_rounding,
            "n_queries": len(self.query_ids),
            "status": self.status_counts(),
            "skipped": list(self.skipped),
            "excluded": list(self.excluded),
            "n_unjudged": len(self.unjudged),
            "n_duplicates": self.n_duplicates,
            "metrics": self.aggregate(ci=ci, seed=seed),
        }
        if per_query:
            out["per_query"] = self.per_query()
        return json_safe(out)

    def to_pandas(self) -> Any:
        """The per-query table as a DataFrame indexed by query id (columns: status, then one per metric).

        Needs pandas (`pip install 'retbench[pandas]'`).
        """
        from retbench.io.frames import pandas

        frame = pandas().DataFrame(
            self.values, index=pandas().Index(self.query_ids, name="query_id"), columns=self.metrics
        )
        frame.insert(0, "status", self.status)
        frame.attrs.update(system=self.system, mode=self.mode, skipped=list(self.skipped))
        return frame

    _HEADER_KEYS = (
        "system",
        "mode",
        "relevance_level",
        "no_relevant",
        "default_k",
        "n_duplicates",
        "skipped",
        "excluded",
        "unjudged",
        "trec_names",
        "ignore_identical_ids",
        "n_identical",
        "recall_rounding",
    )

    def to_tsv(self, path: str | Path) -> None:
        """Per-query table (query_id, status, one column per metric) with '#' header lines carrying the rest
        (`io/tables.py`); `from_tsv` gives back identical floats."""
        header = {key: getattr(self, key) for key in self._HEADER_KEYS}
        write_table(path, header, self.metrics, self.query_ids, self.status, self.values)

    @classmethod
    def from_tsv(cls, path: str | Path) -> Evaluation:
        """Read a table written by `to_tsv`."""
        p = Path(path)
        meta, metrics, query_ids, status, values = read_table(p, cls._HEADER_KEYS, STATUSES)
        return cls(
            system=meta.get("system", p.stem),
            metrics=metrics,
            query_ids=query_ids,
            values=values,
            status=status,
            skipped=list(meta.get("skipped", [])),
            mode=meta.get("mode", "trec_eval"),
            n_duplicates=int(meta.get("n_duplicates", 0)),
            excluded=list(meta.get("excluded", [])),
            unjudged=list(meta.get("unjudged", [])),
            relevance_level=int(meta.get("relevance_level", 1)),
            no_relevant=meta.get("no_relevant", "skip"),
            default_k=int(meta.get("default_k", 5)),
            trec_names=list(meta.get("trec_names", [])) or [None] * len(metrics),
            ignore_identical_ids=bool(meta.get("ignore_identical_ids", False)),
            n_identical=int(meta.get("n_identical", 0)),
            recall_rounding=str(meta.get("recall_rounding", LEGACY_ROUNDING)),
        )
