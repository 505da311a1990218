"""The dataset step every study shares: load a dataset, select its judged queries, describe it.

A study (benchmark run, ingestion impact, stress) names its data with a `DatasetSpec`; this module
turns that into the corpus, the queries and the qrels it runs on, and into the dataset's entry of
the study's manifest.json (whose fingerprints let `compare` refuse results computed on other data).
Studies import this module, never each other.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from retbench.config import DatasetSpec, sample_ids
from retbench.data import Corpus, Dataset, Qrels, Queries
from retbench.errors import InputError
from retbench.io.beir import query_line
from retbench.io.datasets import empty_queries, load_dataset
from retbench.io.irds import PREFIX as IRDS_PREFIX
from retbench.metrics.settings import EvalSettings
from retbench.retrievers.scope import document_type

__all__ = ["PreparedData", "dataset_manifest", "load_prepared", "prepare_dataset", "require_relevant"]


@dataclass(frozen=True)
class PreparedData:
    """A dataset as a study runs on it: the selected queries, their qrels, and how long loading took."""

    spec: DatasetSpec
    dataset: Dataset
    queries: Queries
    load_seconds: float

    @property
    def qrels(self) -> Qrels:
        return self.dataset.split(self.spec.split)

    def manifest(self) -> dict[str, object]:
        return dataset_manifest(self.dataset, self.spec, self.queries, self.load_seconds)


def prepare_dataset(spec: DatasetSpec) -> tuple[Dataset, Queries]:
    """Load a dataset and select its judged queries (optionally a seeded slice and a smaller corpus).

    `corpus_sample: N` keeps every document judged for the selected queries plus random others up to
    N documents: scores on such a slice are for a quick look, not for comparison with published ones.
    """
    ds = load_dataset(spec.spec, [spec.split], join_rule=spec.join_rule)
    qrels = ds.split(spec.split)
    qids = [q for q in qrels if q in ds.queries]
    if not qids:
        raise InputError(
            f"split {spec.split!r} has no judged query (its qrels are empty or name no known query)",
            path=ds.path,
            field="split",
        )
    rng = random.Random(spec.seed)
    qids = sample_ids(qids, spec.max_queries, rng)
    _refuse_empty_queries(ds, qids)
    corpus = ds.corpus
    if spec.corpus_sample and spec.corpus_sample < len(ds.corpus):
        keep = {d for q in qids for d in qrels[q] if d in ds.corpus}
        others = [d for d in ds.corpus.ids if d not in keep]
        keep.update(rng.sample(others, max(0, spec.corpus_sample - len(keep))))
        corpus = ds.corpus.subset([d for d in ds.corpus.ids if d in keep])
    ds = Dataset(ds.name, corpus, ds.queries, {spec.split: qrels.subset(qids)}, ds.path, ds.problems, ds.samples)
    return ds, ds.queries.subset(qids)


def _refuse_empty_queries(ds: Dataset, qids: list[str]) -> None:
    """A query with no text would be searched as nothing (some backends answer anything, some fail): refused
    before any search, naming its file and line where the dataset is a folder (`datasets info` counts them)."""
    blank = empty_queries(ds.queries, qids)
    if not blank:
        return
    more = f" (and {len(blank) - 1} more: {', '.join(blank[1:4])}{', ...' if len(blank) > 4 else ''})"
    reason = f"query {blank[0]!r} has no text{more if len(blank) > 1 else ''}: give it text or remove it"
    where = query_line(ds.path, blank[0]) if ds.path else None
    if where is not None:
        raise InputError(reason, path=where[0], line=where[1], field="text")
    raise InputError(reason, path=ds.path or None, field=f"queries[{blank[0]!r}]")


def load_prepared(spec: DatasetSpec) -> PreparedData:
    """`prepare_dataset` with its load time, as one value a study passes on."""
    t0 = time.perf_counter()
    ds, queries = prepare_dataset(spec)
    return PreparedData(spec, ds, queries, time.perf_counter() - t0)


def dataset_manifest(ds: Dataset, dspec: DatasetSpec, queries: Queries, load_seconds: float) -> dict[str, object]:
    """A dataset's entry in a study's manifest.json (the fingerprints let compare refuse other data)."""
    qrels = ds.split(dspec.split)
    irds = {"irds": dspec.spec.removeprefix(IRDS_PREFIX)} if dspec.spec.startswith(IRDS_PREFIX) else {}
    return {
        "name": ds.name,
        **irds,
        "path": ds.path,
        "split": dspec.split,
        "documents": len(ds.corpus),
        "queries": len(queries),
        "corpus_fingerprint": ds.corpus.fingerprint(),
        "qrels_fingerprint": qrels.fingerprint(),
        "join_rule": ds.corpus.join_rule,
        "max_queries": dspec.max_queries,
        "corpus_sample": dspec.corpus_sample,
        "load_seconds": round(load_seconds, 3),
        "problems": ds.problems,
    }


def require_relevant(qrels: Qrels, settings: EvalSettings, path: str, split: str) -> None:
    """Refuse a split whose every query would be skipped: its means would be over no query at all."""
    if settings.no_relevant_policy != "skip":
        return
    level = settings.relevance_level
    if not any(g >= level for q in qrels for g in qrels[q].values()):
        raise InputError(
            f"split {split!r} judges no document relevant (grade >= {level}), so every query would be skipped; "
            "use another split or set evaluation.no_relevant",
            path=path,
            field="split",
        )


def doc_type_groups(qrels: Qrels, corpus: Corpus) -> dict[str, list[str]]:
    """Query ids by the type of their gold supports' documents (`doc_type:<type>`: corpus metadata `type`, else
    the rel_path's extension; retrievers/scope.py `document_type`), so every metric and the failure rates break
    down by document type (a query with gold in two types is in both)."""
    meta = corpus.metadata
    pos = {d: i for i, d in enumerate(corpus.ids)}
    groups: dict[str, list[str]] = {}
    for q, docs in qrels.items():
        types = {
            document_type(d, meta[pos[d]] if meta is not None else None) for d, g in docs.items() if g > 0 and d in pos
        }
        for t in sorted(types - {""}):
            groups.setdefault(f"doc_type:{t}", []).append(q)
    return groups
