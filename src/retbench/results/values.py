"""What a document-values study returns: every document's value, and what the values show.

The study (`retbench.studies.values`) computes these records; the report (`retbench.report.values`) formats a
`ValuesResult` and nothing else. On disk (`write_values`, `read_values`):

    summary.json   `ValuesSummary.to_dict()`: method, utility, the Monte-Carlo settings or the check against
                   exact, counts, harmful documents, value by group, near-duplicate groups, leaks
    values.json    `[DocumentValue.to_dict(), ...]`, highest value first (every document)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from retbench.io.files import write_json
from retbench.jsontypes import as_object
from retbench.results.files import read_json


@dataclass(frozen=True)
class DocumentValue:
    """One document's row: its rank by value, the value (with its standard error for a Monte-Carlo estimate),
    leave-one-out, how many queries it is relevant for, its novelty and near-duplicate group where computed."""

    rank: int
    doc_id: str
    title: str
    value: float
    leave_one_out: float
    relevant_for: int
    stderr: float | None = None
    novelty: float | None = None
    near_duplicate_group: int | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {k: v for k, v in asdict(self).items() if v is not None}
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> DocumentValue:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})  # type: ignore[arg-type]


@dataclass(frozen=True)
class DisplacedDocument:
    """A judged document a harmful one outranks below the top k, and its position in the whole ranking."""

    doc_id: str
    position: int


@dataclass(frozen=True)
class QueryHurt:
    """A query a harmful document charges: its per-query value and the documents it displaced (first 3)."""

    query_id: str
    query: str
    value: float
    displaced: list[DisplacedDocument]

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> QueryHurt:
        shown = d.get("displaced")
        return cls(
            str(d["query_id"]),
            str(d["query"]),
            float(d["value"]),  # type: ignore[arg-type]
            [DisplacedDocument(**x) for x in shown] if isinstance(shown, list) else [],
        )


@dataclass(frozen=True)
class HarmfulDocument:
    """A document with a negative value, the queries it hurts most (first 5) and how many it hurts."""

    doc_id: str
    value: float
    queries_hurt: list[QueryHurt]
    queries_hurt_total: int

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> HarmfulDocument:
        hurt = d.get("queries_hurt")
        return cls(
            str(d["doc_id"]),
            float(d["value"]),  # type: ignore[arg-type]
            [QueryHurt.from_dict(q) for q in hurt] if isinstance(hurt, list) else [],
            int(d["queries_hurt_total"]),  # type: ignore[call-overload]
        )


@dataclass(frozen=True)
class GroupValue:
    """One group of documents: how many, their summed and mean value, how many are harmful."""

    group: str
    documents: int
    value: float
    mean: float
    harmful: int


@dataclass(frozen=True)
class NearDuplicateGroup:
    """Documents linked by embedding cosine >= the threshold (first 10 ids), their count and summed value."""

    group: int
    doc_ids: list[str]
    size: int
    value: float


@dataclass(frozen=True)
class NearDuplicates:
    """The near-duplicate search: its threshold, whether it ran (not for very large corpora), what it found."""

    threshold: float
    checked: bool
    groups: int
    documents: int
    largest: list[NearDuplicateGroup]

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> NearDuplicates:
        largest = d.get("largest")
        return cls(
            float(d["threshold"]),  # type: ignore[arg-type]
            bool(d["checked"]),
            int(d["groups"]),  # type: ignore[call-overload]
            int(d["documents"]),  # type: ignore[call-overload]
            [NearDuplicateGroup(**g) for g in largest] if isinstance(largest, list) else [],
        )


@dataclass(frozen=True)
class Leak:
    """A query that leaks: the documents holding its text, those within the cosine threshold, and the other
    queries with the same text (first 5 of each)."""

    query_id: str
    query: str
    text_in: list[str]
    embedding_near: list[str]
    same_text_as_queries: list[str]


@dataclass(frozen=True)
class Leaks:
    """Queries that leak into the corpus, counted per rule; `leaked` lists the first ones (`list` on disk)."""

    threshold: float
    queries: int
    text_in_corpus: int
    embedding_near: int
    same_text_as_another_query: int
    leaked: list[Leak] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = asdict(self)
        out["list"] = out.pop("leaked")
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Leaks:
        found = d.get("list")
        return cls(
            float(d["threshold"]),  # type: ignore[arg-type]
            int(d["queries"]),  # type: ignore[call-overload]
            int(d["text_in_corpus"]),  # type: ignore[call-overload]
            int(d["embedding_near"]),  # type: ignore[call-overload]
            int(d["same_text_as_another_query"]),  # type: ignore[call-overload]
            [Leak(**x) for x in found] if isinstance(found, list) else [],
        )


@dataclass(frozen=True)
class MonteCarlo:
    """The permutation estimate's settings."""

    permutations: int
    seed: int


@dataclass(frozen=True)
class MonteCarloCheck:
    """How far a Monte-Carlo estimate lies from the exact values: correlation; among documents whose estimate
    varied across permutations, the share within 4 standard errors; the largest differences."""

    permutations: int
    seed: int
    correlation: float
    documents_with_spread: int
    within_4_stderr: float
    max_abs_difference_without_spread: float
    max_abs_difference: float


@dataclass(frozen=True)
class ValuesSummary:
    """The study's figures (summary.json). `monte_carlo` is set for an estimate, `monte_carlo_check` for exact
    values checked against one; `groups` maps each grouping (judgement, then the configured fields) to its rows,
    largest summed value first."""

    method: str
    utility: str
    k: int
    relevance_level: int
    documents: int
    queries: int
    queries_skipped_no_relevant: int
    utility_of_corpus: float
    sum_of_values: float
    positive: int
    zero: int
    negative: int
    leave_one_out_nonzero: int
    harmful: list[HarmfulDocument]
    groups: dict[str, list[GroupValue]]
    near_duplicates: NearDuplicates
    leaks: Leaks
    monte_carlo: MonteCarlo | None = None
    monte_carlo_check: MonteCarloCheck | None = None

    def to_dict(self) -> dict[str, object]:
        """summary.json: method and utility first, then the Monte-Carlo block, then the figures."""
        head: dict[str, object] = {"method": self.method, "utility": self.utility}
        if self.monte_carlo_check is not None:
            head["monte_carlo_check"] = asdict(self.monte_carlo_check)
        if self.monte_carlo is not None:
            head["monte_carlo"] = asdict(self.monte_carlo)
        body = {
            k: v
            for k, v in asdict(self).items()
            if k not in ("method", "utility", "monte_carlo", "monte_carlo_check", "leaks")
        }
        return {**head, **body, "leaks": self.leaks.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> ValuesSummary:
        mc, check = d.get("monte_carlo"), d.get("monte_carlo_check")
        groups = as_object(d.get("groups"))
        harmful = d.get("harmful")
        plain = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(
            **{
                **plain,
                "harmful": [HarmfulDocument.from_dict(h) for h in harmful] if isinstance(harmful, list) else [],
                "groups": {
                    str(g): [GroupValue(**r) for r in rows] for g, rows in groups.items() if isinstance(rows, list)
                },
                "near_duplicates": NearDuplicates.from_dict(as_object(d.get("near_duplicates"))),
                "leaks": Leaks.from_dict(as_object(d.get("leaks"))),
                "monte_carlo": MonteCarlo(**mc) if isinstance(mc, Mapping) else None,
                "monte_carlo_check": MonteCarloCheck(**check) if isinstance(check, Mapping) else None,
            }  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class ValuesResult:
    """A document-values study as it ran: its name, the summary, every document (highest value first), and how
    many rows each ranked table of the report shows."""

    name: str
    summary: ValuesSummary
    documents: list[DocumentValue]
    top: int = 20


def write_values(out: Path, result: ValuesResult) -> None:
    """summary.json and values.json, each atomically through the one writer."""
    write_json(out / "summary.json", result.summary.to_dict())
    write_json(out / "values.json", [d.to_dict() for d in result.documents])


def read_values(out: Path, name: str = "", top: int = 20) -> ValuesResult:
    """The result `write_values` put in `out` (a missing or malformed file: an InputError naming it)."""
    rows = read_json(out / "values.json")
    docs: Sequence[object] = rows if isinstance(rows, list) else []
    return ValuesResult(
        name or out.name,
        ValuesSummary.from_dict(as_object(read_json(out / "summary.json"))),
        [DocumentValue.from_dict(as_object(r)) for r in docs],
        top,
    )
