"""The rerank stage: a first-stage Run's top `depth` candidates re-ordered by a reranker.

Rules it keeps on every run (each query that breaks one is recorded as `invalid` with the reason,
never silently repaired):

- the reranked list is a permutation of the first stage's top `depth` (nothing added, nothing lost);
- at depth 1 it is exactly the first stage's top 1;
- a query that failed in the first stage is failed in the reranked run too, with the same error;
- a reranker failure is recorded per query with its message verbatim: when a call for several queries
  raises, each of them is scored again alone, so only the queries that fail alone are failed.

The reranked run holds only the `depth` candidates (ranked by reranker score, ties by doc id
descending as trec_eval orders them), so metrics with a cutoff above `depth` would be capped by the
first stage: the experiment config refuses that (`config.ExperimentModel`).

Pair scores are cached on disk by (reranker fingerprint, sha1 of the query text, sha1 of the
document text), in the same append-only shard format as the embedding cache: a second depth, a
re-run or a second system with the same reranker scores no pair twice.

Each reranker call (up to `queries_per_call` queries) gets `timeout_s` seconds (default 300; null: no
deadline). A call still running then makes each of its queries status `timeout` ("no answer within
300 s (rerank.timeout_s)"), never a score; the late call runs on in its thread and its answer is
discarded (nothing it returns reaches the cache).

With `fuse` the reranked order is a fusion of the first stage's ranking and the reranker's, over
the same `depth` candidates (reranker scores alone are still what the pair cache keeps):

    rerank: {kind: bi_encoder, depth: 100, fuse: {fusion: rrf}}                  # 1/(60 + rank) each
    rerank: {kind: bi_encoder, depth: 100, fuse: {fusion: weighted, weights: [0.3, 0.7]}}

`weights` are [first stage, reranker]; the fusions and normalizations are the hybrid retriever's
(`retrievers/hybrid.py`). This is score interpolation as in Pyserini's and Anserini's rerank
recipes: a reranker weaker than its first stage on its own can still add what the first stage
misses, and the fused list is still a permutation of the first stage's top `depth`.

The block is checked when the config is read, before any indexing or searching: the names and
values of a built-in reranker's parameters (by building it: the builtins load no model until they
score), and a `module:factory` reranker's parameter names against the factory's signature.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retbench.config.experiment import RerankBlock, RerankFuseBlock
from retbench.data import Corpus, Queries, QueryStatus, Run, RunBuilder
from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject
from retbench.retrievers.encoders.cache import EmbeddingCache, default_cache_dir, text_key
from retbench.retrievers.fusion import fuse
from retbench.retrievers.fusion_options import fusion_problem
from retbench.retrievers.rerank.scorers import BUILTIN, KINDS, Reranker, create_reranker

DEFAULT_TIMEOUT_S: float = RerankBlock.model_fields["timeout_s"].default  # the config declares it


def default_pair_cache_dir() -> Path:
    """`$RETBENCH_CACHE/rerank` when set, else `.retbench-cache/rerank` under the current dir."""

    return default_cache_dir().parent / "rerank"


def pair_key(query: str, document: str) -> bytes:
    """sha1(sha1(query) + sha1(document)): the cache key of one pair (20 bytes)."""
    return hashlib.sha1(text_key(query) + text_key(document)).digest()


@dataclass
class RerankStats:
    """Pairs sent to the reranker vs answered from the cache; `calls` counts reranker calls.

    `seconds` is the reranker's own scoring time; `wall_seconds` the stage's whole time per call (cache
    lookups and document reads included), which is what the reranked queries' latencies add.
    """

    scored: int = 0
    cached: int = 0
    calls: int = 0
    seconds: float = 0.0
    wall_seconds: float = 0.0
    isolated_calls: int = 0  # calls of several queries that raised, whose queries were then scored one by one

    def as_dict(self) -> JSONObject:
        return {
            "pairs_scored": self.scored,
            "pairs_cached": self.cached,
            "calls": self.calls,
            "seconds": self.seconds,
            "wall_seconds": self.wall_seconds,
            "isolated_calls": self.isolated_calls,
        }


@dataclass(frozen=True)
class RerankFusion:
    """How a reranked list mixes the first stage's ranking (weights[0]) with the reranker's (weights[1])."""

    fusion: str = "rrf"
    weights: tuple[float, float] = (1.0, 1.0)
    rrf_k: float = 60.0
    normalization: str = "minmax"
    param: float | None = None  # the method's gamma, sigma or phi (retrievers/fusion.py)

    def apply(
        self, first: Sequence[tuple[str, float]], reranked: Sequence[tuple[str, float]]
    ) -> list[tuple[str, float]]:
        """One query's fused ranking of the same candidates (both lists in their own rank order)."""
        by_score = sorted(reranked, key=lambda kv: (kv[1], kv[0]), reverse=True)
        return fuse(
            [first, by_score],
            self.fusion,
            rrf_k=self.rrf_k,
            normalization=self.normalization,
            weights=self.weights,
            param=self.param,
        )

    @classmethod
    def of(cls, block: RerankFuseBlock) -> RerankFusion:
        """The fusion a validated `fuse:` block describes."""
        return cls(block.fusion, (block.weights[0], block.weights[1]), block.rrf_k, block.normalization, block.param)

    def check(self) -> None:
        """The method's own rules (`fusion_options.fusion_problem`: weights only where it reads them, not all zero, its
        parameter in range), or a ConfigError naming the option: run once when the config is read."""
        problem = fusion_problem(
            self.fusion,
            weights=list(self.weights),
            rrf_k=self.rrf_k,
            normalization=self.normalization,
            param=self.param,
            n=2,
        )
        if problem:
            raise ConfigError(problem[1], field=problem[0])

    def describe(self) -> JSONObject:
        extra: JSONObject = {"rrf_k": self.rrf_k} if self.fusion == "rrf" else {"normalization": self.normalization}
        if self.param is not None:
            extra["param"] = self.param
        return {"fusion": self.fusion, "weights": list(self.weights), **extra}


@dataclass
class RerankStage:
    """Rerank a first-stage Run's top `depth` documents; see the module docstring."""

    reranker: Reranker
    depth: int
    cache: bool = True
    cache_dir: str | Path | None = None
    queries_per_call: int = 16
    stats: RerankStats = field(default_factory=RerankStats)
    _cache: EmbeddingCache | None = None
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    fusion: RerankFusion | None = None

    def __post_init__(self) -> None:
        if self.depth < 1 or self.queries_per_call < 1:
            raise ValueError("depth and queries_per_call must be positive")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError("timeout_s must be positive (or None for no deadline)")

    def _score_many(self, todo: list[tuple[str, list[str]]]) -> list[list[float]]:
        """The reranker's scores for `todo`, or TimeoutError when they take longer than `timeout_s`."""
        if self.timeout_s is None:
            return self.reranker.score_many(todo)
        scores: list[list[list[float]]] = []  # the worker's answer, or
        error: list[BaseException] = []  # what it raised

        def call() -> None:
            try:
                scores.append(self.reranker.score_many(todo))
            except BaseException as exc:  # handed to the caller's thread below
                error.append(exc)

        worker = threading.Thread(target=call, daemon=True, name="retbench-rerank")
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():  # abandoned: it runs on, and what it returns is dropped
            raise TimeoutError(f"no answer within {self.timeout_s:g} s (rerank.timeout_s)")
        if error:
            raise error[0]
        return scores[0]

    def describe(self) -> JSONObject:
        d = {"depth": self.depth, **self.reranker.describe()}
        return d | ({"fuse": self.fusion.describe()} if self.fusion is not None else {})

    @property
    def pair_cache(self) -> EmbeddingCache | None:
        if self.cache and self._cache is None:
            fp = hashlib.sha1(self.reranker.fingerprint().encode()).hexdigest()[:16]
            self._cache = EmbeddingCache((Path(self.cache_dir) if self.cache_dir else default_pair_cache_dir()) / fp)
        return self._cache if self.cache else None

    def score(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        """Scores for (query, documents) items; only pairs the cache lacks reach the reranker."""
        keys = [[pair_key(q, d) for d in docs] for q, docs in items]
        cache = self.pair_cache
        found = cache.lookup([k for row in keys for k in row]) if cache is not None else {}
        todo: list[tuple[str, list[str]]] = []
        todo_keys: list[bytes] = []
        for (q, docs), row in zip(items, keys, strict=True):
            missing = [(d, k) for d, k in zip(docs, row, strict=True) if k not in found]
            unique = list({k: d for d, k in missing}.items())  # a document twice is scored once
            if unique:
                todo.append((q, [d for _, d in unique]))
                todo_keys.extend(k for k, _ in unique)
        n_pairs = sum(len(r) for r in keys)
        if todo:
            t0 = time.perf_counter()
            self.stats.calls += 1
            scores = self._score_many(todo)
            self.stats.seconds += time.perf_counter() - t0
            flat = checked_scores(self.reranker, scores, [len(docs) for _, docs in todo])
            if cache is not None:
                cache.append(todo_keys, flat.reshape(-1, 1))
            found.update({k: np.asarray([v]) for k, v in zip(todo_keys, flat.tolist(), strict=True)})
            self.stats.scored += len(todo_keys)
        self.stats.cached += n_pairs - len(todo_keys)
        return [[float(found[k][0]) for k in row] for row in keys]

    def _score_call(self, items: list[tuple[str, list[str]]]) -> list[list[float] | BaseException]:
        """Each item's scores, or the exception that stands for them; a failure lands on the query that raised.

        One reranker call scores every item; when it raises for several queries, each is scored again on
        its own (costing the failed call plus one call per query, counted in `stats.isolated_calls`), so
        only the queries that fail alone are recorded as failed, each with its own message. A timeout is
        not retried query by query (that could cost `timeout_s` per query): every query of the call has it.
        """
        try:
            return list(self.score(items)) if items else []
        except Exception as exc:  # recorded per query by the caller, verbatim
            if len(items) == 1 or isinstance(exc, TimeoutError):
                return [exc] * len(items)
            self.stats.isolated_calls += 1
        out: list[list[float] | BaseException] = []
        for item in items:
            try:
                out.append(self.score([item])[0])
            except Exception as one:
                out.append(one)
        return out

    def rerank(self, first: Run, queries: Queries, corpus: Corpus, *, name: str = "") -> Run:
        """The reranked Run for every query of `first` (failures carried over; see the module docstring)."""
        builder = RunBuilder(name or first.name)
        status = first.status
        qids = list(first.query_ids)
        for start in range(0, len(qids), self.queries_per_call):
            chunk = qids[start : start + self.queries_per_call]
            ready: list[tuple[str, list[str]]] = []
            for q in chunk:
                if status[q].failed:
                    continue
                docs = first.docs(q)[: self.depth]
                unknown = [d for d in docs if d not in corpus]
                if unknown:
                    builder.add(
                        q,
                        status=QueryStatus.INVALID,
                        error=f"first stage returned doc id {unknown[0]!r}, not in the corpus",
                    )
                    continue
                ready.append((q, docs))
            t0 = time.perf_counter()
            outcomes = self._score_call(
                [(queries[q], [corpus.joined(corpus.index[d]) for d in docs]) for q, docs in ready]
            )
            spent = time.perf_counter() - t0
            self.stats.wall_seconds += spent
            share = spent / max(1, len(ready))
            by_q = {q: (docs, outcomes[i]) for i, (q, docs) in enumerate(ready)}
            for q in chunk:
                latency = first.latency.get(q, 0.0) + (share if q in by_q else 0.0)
                # the total is amortised when either part is: the first stage's batch or this call's queries
                batch = max(first.latency_batch.get(q, 1), len(ready))
                if status[q].failed:
                    builder.add(
                        q,
                        status=status[q],
                        latency=first.latency.get(q),
                        error=first.errors.get(q, "failed in the first stage"),
                        batch=first.latency_batch.get(q),
                    )
                elif q not in by_q:
                    continue  # recorded above (invalid first-stage ids)
                else:
                    docs, s = by_q[q]
                    if isinstance(s, BaseException):
                        failed = QueryStatus.TIMEOUT if isinstance(s, TimeoutError) else QueryStatus.ERROR
                        builder.add(q, status=failed, latency=latency, error=f"{type(s).__name__}: {s}", batch=batch)
                        continue
                    ranking = list(zip(docs, s, strict=True))
                    if self.fusion is not None:
                        ranking = self.fusion.apply(first.ranking(q)[: self.depth], ranking)
                    builder.add(q, ranking, latency=latency, batch=batch)
        run = builder.build()
        return mark_violations(first, run, self.depth)


def checked_scores(reranker: Reranker, scores: object, sizes: Sequence[int]) -> np.ndarray:
    """The scores a reranker returned, flat, as float32: one finite real number per document asked about.

    Anything else is a ValueError naming the reranker and what it returned (None, a ragged or short list, text,
    NaN), before NumPy or the pair cache sees it: the rerank stage records it on every query of the call.
    """
    who = f"reranker {reranker.describe().get('kind') or type(reranker).__name__}"
    if not isinstance(scores, Sequence) or isinstance(scores, (str, bytes)):
        raise ValueError(f"{who} returned {type(scores).__name__}, not one list of scores per query")
    if len(scores) != len(sizes):
        raise ValueError(f"{who} returned {len(scores)} score lists for {len(sizes)} queries")
    flat: list[float] = []
    for i, (row, n) in enumerate(zip(scores, sizes, strict=True)):
        if isinstance(row, np.ndarray):
            row = row.tolist()
        if not isinstance(row, Sequence) or isinstance(row, (str, bytes)):
            raise ValueError(f"{who} returned {type(row).__name__} for query {i + 1}, not a list of {n} scores")
        if len(row) != n:
            raise ValueError(f"{who} returned {len(row)} scores for {n} documents (query {i + 1})")
        for x in row:
            if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise ValueError(f"{who} returned a score of type {type(x).__name__} ({x!r:.40}) for query {i + 1}")
            if not math.isfinite(x):
                raise ValueError(f"{who} returned a non-finite score ({x}) for query {i + 1}")
        flat.extend(row)
    with np.errstate(over="ignore"):  # an overflow is found and named just below
        out = np.asarray(flat, dtype=np.float32)
    if not np.isfinite(out).all():  # finite as a Python float, beyond float32 (the pair cache's type)
        raise ValueError(f"{who} returned a score beyond float32's range ({flat[int(np.argmin(np.isfinite(out)))]:g})")
    return out


def invariant_problem(first_docs: Sequence[str], reranked_docs: Sequence[str], depth: int) -> str | None:
    """Why a reranked list breaks the stage's rules for one query, or None when it keeps them."""
    top = list(first_docs[:depth])
    if sorted(reranked_docs) != sorted(top):
        extra = [d for d in reranked_docs if d not in set(top)]
        if extra:
            return f"reranked doc {extra[0]!r} is not in the first stage's top {depth}"
        return f"reranked list has {len(reranked_docs)} docs, the first stage's top {depth} has {len(top)}"
    if depth == 1 and list(reranked_docs[:1]) != top[:1]:
        return "at depth 1 the reranked run must equal the first stage's top 1"
    return None


def mark_violations(first: Run, reranked: Run, depth: int) -> Run:
    """The reranked Run with every query that breaks an invariant turned into an `invalid` failure."""
    status = reranked.status
    bad: dict[str, str] = {}
    for q in reranked.query_ids:
        if not status[q].failed and q in first:
            problem = invariant_problem(first.docs(q), reranked.docs(q), depth)
            if problem:
                bad[q] = problem
    if not bad:
        return reranked
    builder = RunBuilder(reranked.name)
    for q in reranked.query_ids:
        if q in bad:
            builder.add(
                q,
                status=QueryStatus.INVALID,
                latency=reranked.latency.get(q),
                error=bad[q],
                batch=reranked.latency_batch.get(q),
            )
        else:
            builder.add(
                q,
                reranked.ranking(q),
                status=status[q],
                latency=reranked.latency.get(q),
                error=reranked.errors.get(q),
                batch=reranked.latency_batch.get(q),
            )
    return builder.build()


def build_rerank(block: RerankBlock, *, where: str = "", cache_dir: Path | None = None) -> RerankStage:
    """The stage a validated `rerank:` block describes (its reranker built now)."""
    return RerankStage(
        create_reranker(block.kind, block.params, where=where),
        block.depth,
        block.cache,
        cache_dir,
        block.queries_per_call,
        timeout_s=block.timeout_s,
        fusion=RerankFusion.of(block.fuse) if block.fuse is not None else None,
    )


def check_rerank(block: RerankBlock, *, where: str = "", fld: str = "rerank") -> None:
    """Check a validated `rerank:` block against its reranker before any work; every error names the field."""
    if not (block.kind in KINDS or ":" in block.kind):
        raise ConfigError(
            f"rerank kind must be one of {', '.join(KINDS)} or module:factory, got {block.kind!r}",
            path=where or None,
            field=f"{fld}.kind",
        )
    _check_reranker(block.kind, block.params, where, fld)
    if block.fuse is not None:
        try:
            RerankFusion.of(block.fuse).check()
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=where or None, field=f"{fld}.fuse.{exc.field}") from None


def _check_reranker(kind: str, params: dict[str, Any], where: str, fld: str) -> None:
    """Check a reranker's parameters before any work (see the module docstring): a mistake found after
    the first stage ran would leave a journal the corrected config can no longer resume."""
    from retbench.retrievers.base import check_params, import_object

    if kind in BUILTIN:
        check_params(BUILTIN[kind], params, what=f"rerank kind {kind!r}", where=where, prefix=f"{fld}.")
        try:
            create_reranker(kind, params, where=where)  # the builtins check values here and load nothing
        except ConfigError as exc:
            raise ConfigError(
                exc.reason, path=where or None, field=fld if exc.field == "rerank" else exc.field
            ) from None
        return
    factory = import_object(kind, field=f"{fld}.kind")
    check_params(factory, params, what=f"rerank kind {kind!r}", where=where, prefix=f"{fld}.")
