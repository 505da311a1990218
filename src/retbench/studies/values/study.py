"""The document-values study: load a dataset, value every document for its judged queries, write the results.

Exact values (KNN-Shapley and leave-one-out, `retbench.values.exact`) for a dense flat inner-product retriever
with precision@k or recall@k; otherwise a seeded Monte-Carlo permutation estimate over the retriever's
full-corpus ranking (`retbench.values.montecarlo`, which states what a coalition's ranking is). Then what the
values show (`findings`): harmful documents with the queries they hurt and the judged documents they crowd out,
sums by group, near-duplicate groups and leaks. Writes values.json, summary.json, manifest.json and report.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retbench.config.study import load_study
from retbench.config.values import ValuesModel
from retbench.data import Corpus, Qrels
from retbench.errors import ConfigError
from retbench.io.files import write_json, write_text
from retbench.report.values import render_values_report
from retbench.results.values import (
    DisplacedDocument,
    DocumentValue,
    HarmfulDocument,
    Leak,
    Leaks,
    MonteCarlo,
    MonteCarloCheck,
    NearDuplicateGroup,
    NearDuplicates,
    QueryHurt,
    ValuesResult,
    ValuesSummary,
    write_values,
)
from retbench.retrievers.base import Retriever, check_system, create
from retbench.retrievers.encoders import Encoder
from retbench.studies.dataset import dataset_manifest, prepare_dataset
from retbench.studies.impact.novelty import normalize_rows
from retbench.studies.manifest import manifest_header
from retbench.studies.values.findings import (
    embedding_leaks,
    group_key,
    group_sums,
    near_duplicate_groups,
    query_overlaps,
    text_leaks,
)
from retbench.values import (
    Displaced,
    Judged,
    charges,
    id_tiebreak,
    leave_one_out_ranked,
    ndcg_at,
    permutation_shapley,
    precision_at,
    ranking_order,
    ranks_from_order,
    recall_at,
    shapley_streamed,
)
from retbench.values.montecarlo import Utility

#: all-pairs near-duplicate search above this many documents is skipped (O(N^2) time)
NEAR_DUPLICATE_LIMIT = 200_000


@dataclass
class ValuesOutcome:
    """The validated config and the typed result the study wrote (`retbench.results.values`)."""

    model: ValuesModel
    result: ValuesResult

    @property
    def summary(self) -> ValuesSummary:
        return self.result.summary

    @property
    def documents(self) -> list[DocumentValue]:
        """Every document, highest value first."""
        return self.result.documents


def load_values_config(path: str | Path, output: str | Path | None = None) -> ValuesModel:
    """The validated config, its retriever checked against its factory; errors name file:line and field."""
    return load_study(path, ValuesModel, output, check=_check)


def _check(model: ValuesModel) -> None:
    check_system(model.retriever.adapter, model.retriever.params, model.source, "retriever")


@dataclass
class _Data:
    corpus: Corpus
    ids: list[str]
    qids: list[str]
    texts: list[str]
    judged: Judged
    gains: list[dict[int, float]]  # per query: document index -> grade (judged positive, in the corpus)
    ideal: list[np.ndarray]  # per query: every positive grade (in the corpus or not)
    skipped: int


def _data(model: ValuesModel, corpus: Corpus, queries: Any, qrels: Qrels) -> _Data:
    ids = [str(x) for x in corpus.ids]
    index = {d: i for i, d in enumerate(ids)}
    level, k = model.relevance_level, model.k
    qids: list[str] = []
    qi: list[int] = []
    di: list[int] = []
    gains: list[dict[int, float]] = []
    ideal: list[np.ndarray] = []
    z: list[float] = []
    for qid in queries:
        judged = qrels.get(qid, {})
        relevant = [d for d, g in judged.items() if g >= level]
        if not relevant:
            continue
        row = len(qids)
        qids.append(qid)
        gains.append({index[d]: float(g) for d, g in judged.items() if g > 0 and d in index})
        ideal.append(np.array([g for g in judged.values() if g > 0], dtype=np.float64))
        for d in relevant:
            if d in index:
                qi.append(row)
                di.append(index[d])
        z.append(float(k) if model.utility == "precision" else float(len(relevant)))
    if not qids:
        raise ConfigError(f"no query has a document at relevance level {level}", field="relevance_level")
    judged_pairs = Judged(np.array(qi, dtype=np.int64), np.array(di, dtype=np.int64), np.ones(len(qi)), np.array(z))
    texts = [queries[q] for q in qids]
    return _Data(corpus, ids, qids, texts, judged_pairs, gains, ideal, len(queries) - len(qids))


def _utility(model: ValuesModel, d: _Data) -> Utility:
    if model.utility == "precision":
        return precision_at(model.k, model.relevance_level)
    if model.utility == "recall":
        return recall_at(model.k, d.judged.denominators, model.relevance_level)
    return ndcg_at(model.k, d.ideal)


def _gain_matrix(d: _Data) -> np.ndarray:
    g = np.zeros((len(d.qids), len(d.ids)))
    for row, by_doc in enumerate(d.gains):
        for doc, grade in by_doc.items():
            g[row, doc] = grade
    return g


def _full_ranks(retriever: Retriever, d: _Data, tb: np.ndarray) -> np.ndarray:
    """(Q, N) positions from the retriever's full-depth ranking; unreturned documents after, by id descending."""
    index = {x: i for i, x in enumerate(d.ids)}
    by_tie = np.argsort(-tb, kind="stable")
    order = np.empty((len(d.qids), len(d.ids)), dtype=np.int64)
    for row, ranking in enumerate(retriever.search_batch(d.texts, len(d.ids))):
        got = [index[doc] for doc, _ in ranking if doc in index]
        seen = np.zeros(len(d.ids), dtype=bool)
        seen[got] = True
        order[row] = np.concatenate([np.array(got, dtype=np.int64), by_tie[~seen[by_tie]]])
    return ranks_from_order(order)


def _harm(
    model: ValuesModel, d: _Data, values: np.ndarray, detail: Callable[[int], tuple[np.ndarray, list[Any]]]
) -> list[HarmfulDocument]:
    """The most harmful documents with the queries they hurt and the judged documents they outrank below k."""
    out = []
    for doc in [int(i) for i in np.argsort(values, kind="stable") if values[i] < 0][: model.top]:
        per_query, displaced = detail(doc)
        hurt = [int(q) for q in np.argsort(per_query, kind="stable") if per_query[q] < 0]
        out.append(
            HarmfulDocument(
                d.ids[doc],
                float(values[doc]),
                [
                    QueryHurt(
                        d.qids[q],
                        d.texts[q],
                        float(per_query[q]),
                        [DisplacedDocument(d.ids[x.doc], x.position) for x in displaced if x.query == q][:3],
                    )
                    for q in hurt[:5]
                ],
                len(hurt),
            )
        )
    return out


def _ranked_detail(ranks: np.ndarray, d: _Data, k: int) -> Callable[[int], tuple[np.ndarray, list[Any]]]:
    """For the Monte-Carlo path: a query counts as hurt where the document outranks a judged one below k
    (the rule the exact charges follow); its per-query value is -1 per such judged document (a count)."""

    def detail(doc: int) -> tuple[np.ndarray, list[Any]]:
        j = d.judged
        crowd = (ranks[j.query, doc] < ranks[j.query, j.doc]) & (ranks[j.query, j.doc] >= k) & (j.doc != doc)
        per_query = np.zeros(len(d.qids))
        np.add.at(per_query, j.query[crowd], -1.0)
        shown = [
            Displaced(int(j.query[p]), int(j.doc[p]), int(ranks[j.query[p], j.doc[p]]) + 1)
            for p in np.flatnonzero(crowd)
        ]
        return per_query, sorted(shown, key=lambda x: (x.query, x.position))

    return detail


def _agreement(est: Any, exact: np.ndarray, seed: int) -> MonteCarloCheck:
    """How far the Monte-Carlo estimate is from exact: correlation, and among documents whose estimate varied
    across permutations the share within 4 standard errors (few nonzero contributions make a standard error
    itself uncertain); a document whose contribution never varied has standard error 0, so its largest difference
    from exact is reported instead."""
    spread = est.stderr > 0
    z = np.abs(est.values - exact)[spread] / est.stderr[spread]
    return MonteCarloCheck(
        permutations=est.permutations,
        seed=seed,
        correlation=float(np.corrcoef(est.values, exact)[0, 1]) if len(exact) > 1 else 1.0,
        documents_with_spread=int(spread.sum()),
        within_4_stderr=float(np.mean(z <= 4)) if len(z) else 1.0,
        max_abs_difference_without_spread=float(np.max(np.abs(est.values - exact)[~spread], initial=0.0)),
        max_abs_difference=float(np.max(np.abs(est.values - exact))),
    )


def _encoder(model: ValuesModel, retriever: Retriever) -> Encoder:
    return retriever.encoder if isinstance(retriever.encoder, Encoder) else Encoder(**model.encoder.options)


def run_values(model: ValuesModel, *, log: Callable[[str], None] = print) -> ValuesOutcome:
    """Run a document-values study and write its results folder."""
    timings: dict[str, float] = {}
    t_all = t0 = time.perf_counter()
    spec = model.dataset.to_spec(model.seed)
    ds, queries = prepare_dataset(spec)
    d = _data(model, ds.corpus, queries, ds.split(spec.split))
    timings["load_seconds"] = time.perf_counter() - t0
    log(f"{len(d.ids)} documents, {len(d.qids)} queries with a relevant document ({d.skipped} without: skipped)")
    retriever = create(model.retriever.adapter, model.retriever.params, name=model.retriever.name, where=model.source)
    dense_flat = retriever.index_type == "flat_ip"
    method = model.method
    if method == "auto":
        method = "exact" if dense_flat and model.utility != "ndcg" else "monte_carlo"
    if method == "exact" and not dense_flat:
        raise ConfigError("exact values need a dense retriever with index flat_ip", path=model.source, field="method")
    encoder = _encoder(model, retriever)
    tb = id_tiebreak(d.ids)
    t0 = time.perf_counter()
    dv = np.ascontiguousarray(encoder.encode_documents(d.corpus.joined_texts()), dtype=np.float32)
    qv = np.ascontiguousarray(encoder.encode_queries(d.texts), dtype=np.float32)
    timings["encode_seconds"] = time.perf_counter() - t0
    utility = _utility(model, d)
    mc_seed = model.monte_carlo.seed if model.monte_carlo.seed is not None else model.seed
    check: MonteCarloCheck | None = None
    monte_carlo: MonteCarlo | None = None
    t0 = time.perf_counter()
    stderr = None
    if method == "exact":
        sv = shapley_streamed(qv, dv, d.judged, model.k, tb)
        values, loo, u_all = sv.shapley, sv.leave_one_out, float(sv.utility.mean())

        def exact_detail(doc: int) -> tuple[np.ndarray, list[Any]]:
            return charges(doc, qv @ dv[doc], d.judged, sv, model.k, tb)

        detail: Callable[[int], tuple[np.ndarray, list[Any]]] = exact_detail

        ranks = None
        if model.monte_carlo.check:
            ranks = ranks_from_order(ranking_order(qv @ dv.T, tb))
            est = permutation_shapley(
                ranks, _gain_matrix(d), utility, permutations=model.monte_carlo.permutations, seed=mc_seed
            )
            check = _agreement(est, values, mc_seed)
    else:
        if dense_flat:
            ranks = ranks_from_order(ranking_order(qv @ dv.T, tb))
        else:
            retriever.index(d.corpus)
            ranks = _full_ranks(retriever, d, tb)
        gains = _gain_matrix(d)
        est = permutation_shapley(ranks, gains, utility, permutations=model.monte_carlo.permutations, seed=mc_seed)
        values, stderr = est.values, est.stderr
        loo = leave_one_out_ranked(ranks, gains, utility)
        order = np.argsort(ranks, axis=1)[:, : model.k]
        u_all = float(utility(np.take_along_axis(gains, order, axis=1), np.arange(len(d.qids))).mean())
        monte_carlo = MonteCarlo(est.permutations, mc_seed)
        detail = _ranked_detail(ranks, d, model.k)
    timings["values_seconds"] = time.perf_counter() - t0
    log(f"{method} values in {timings['values_seconds']:.2f}s; {utility.name} of the corpus {u_all:.4f}")
    documents, summary = _findings(
        model, d, ds, qv, dv, values, stderr, loo, u_all, detail, _Method(method, utility.name, monte_carlo, check)
    )
    retriever.close()
    timings["total_seconds"] = time.perf_counter() - t_all
    manifest = {
        **manifest_header(model, name=model.study_name, kind="values"),
        "dataset": dataset_manifest(ds, spec, queries, timings["load_seconds"]),
        "retriever": retriever.describe(),
        "encoder": encoder.describe(),
        "timings": {k: round(v, 3) for k, v in timings.items()},
    }
    out = model.output_dir
    out.mkdir(parents=True, exist_ok=True)
    result = ValuesResult(model.study_name, summary, documents, model.top)
    write_json(out / "manifest.json", manifest)
    write_values(out, result)
    write_text(out / "report.md", render_values_report(result))
    return ValuesOutcome(model, result)


def _leaks(model: ValuesModel, d: _Data, ds: Any, nq: np.ndarray, nd: np.ndarray) -> Leaks:
    """Queries that leak into the corpus, by each stated rule: their text inside a document, a document within
    the cosine threshold, or the same text as another query; counted per rule and listed."""
    text_hits = text_leaks(d.texts, d.corpus.joined_texts())
    emb_hits = embedding_leaks(nq, nd, model.leaks.threshold)
    overlaps = query_overlaps(d.qids, {str(q): ds.queries[q] for q in ds.queries})
    found = [
        Leak(
            qid,
            d.texts[r],
            [d.ids[x] for x in text_hits[r]][:5],
            [d.ids[x] for x in emb_hits[r]][:5],
            overlaps.get(qid, [])[:5],
        )
        for r, qid in enumerate(d.qids)
        if text_hits[r] or emb_hits[r] or qid in overlaps
    ]
    return Leaks(
        threshold=model.leaks.threshold,
        queries=len(found),
        text_in_corpus=sum(bool(x) for x in text_hits),
        embedding_near=sum(bool(x) for x in emb_hits),
        same_text_as_another_query=len(overlaps),
        leaked=found[: model.top],
    )


@dataclass(frozen=True)
class _Method:
    """How the values were computed: exact or Monte-Carlo, the utility's name, the estimate's settings or the
    check of exact values against one."""

    method: str
    utility: str
    monte_carlo: MonteCarlo | None
    check: MonteCarloCheck | None


def _findings(
    model: ValuesModel,
    d: _Data,
    ds: Any,
    qv: np.ndarray,
    dv: np.ndarray,
    values: np.ndarray,
    stderr: np.ndarray | None,
    loo: np.ndarray,
    u_all: float,
    detail: Callable[[int], tuple[np.ndarray, list[Any]]],
    how: _Method,
) -> tuple[list[DocumentValue], ValuesSummary]:
    n = len(d.ids)
    relevant_for = np.bincount(d.judged.doc, minlength=n)
    nq, nd = normalize_rows(qv), normalize_rows(dv)
    groups: list[list[int]] = []
    novelty = np.full(n, np.nan)
    if n <= NEAR_DUPLICATE_LIMIT:
        groups, novelty = near_duplicate_groups(nd, model.near_duplicates.threshold)
    group_of = {i: g for g, members in enumerate(groups) for i in members}
    order = np.argsort(-values, kind="stable")
    documents = [
        DocumentValue(
            rank=rank,
            doc_id=d.ids[i],
            title=d.corpus.title(int(i))[:120],
            value=float(values[i]),
            leave_one_out=float(loo[i]),
            relevant_for=int(relevant_for[i]),
            stderr=float(stderr[i]) if stderr is not None else None,
            novelty=None if np.isnan(novelty[i]) else float(novelty[i]),
            near_duplicate_group=group_of.get(int(i)),
        )
        for rank, i in enumerate(order, 1)
    ]
    meta = d.corpus.metadata
    by_judgement = [
        "relevant to an evaluation query" if r else "never relevant to an evaluation query" for r in relevant_for
    ]
    grouped = {"judgement": group_sums(by_judgement, values)}
    for field in model.group_by:
        keys = [group_key(x, meta[i] if meta is not None else None, field) for i, x in enumerate(d.ids)]
        grouped[field] = group_sums(keys, values)
    summary = ValuesSummary(
        method=how.method,
        utility=how.utility,
        monte_carlo=how.monte_carlo,
        monte_carlo_check=how.check,
        k=model.k,
        relevance_level=model.relevance_level,
        documents=n,
        queries=len(d.qids),
        queries_skipped_no_relevant=d.skipped,
        utility_of_corpus=u_all,
        sum_of_values=float(values.sum()),
        positive=int((values > 0).sum()),
        zero=int((values == 0).sum()),
        negative=int((values < 0).sum()),
        leave_one_out_nonzero=int((loo != 0).sum()),
        harmful=_harm(model, d, values, detail),
        groups=grouped,
        near_duplicates=NearDuplicates(
            threshold=model.near_duplicates.threshold,
            checked=n <= NEAR_DUPLICATE_LIMIT,
            groups=len(groups),
            documents=sum(len(g) for g in groups),
            largest=[
                NearDuplicateGroup(g, [d.ids[i] for i in members][:10], len(members), float(values[members].sum()))
                for g, members in enumerate(groups[: model.top])
            ],
        ),
        leaks=_leaks(model, d, ds, nq, nd),
    )
    return documents, summary
