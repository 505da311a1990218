"""Framework retrievers: a LangChain or LlamaIndex retriever, built by the user's own factory, run as a system.

A config names a factory (`module:function`) and its `params`. At `index(corpus)` the factory is called
with `documents=` the corpus as the framework's own document objects (when it takes a `documents`
parameter; a factory over an index it already holds may ignore the corpus) and returns the framework's
retriever. Every document carries its retbench id twice: in `metadata[id_key]` and as the framework's
own document id (`Document.id` in LangChain, `id_`/`ref_doc_id` in LlamaIndex); the text is the corpus'
`title + " " + text`, as the dense adapter embeds it.

Answers are read back the same way: the doc id is `metadata[id_key]`, else the framework's document id.
The served order is what is evaluated: a framework score is kept only when every hit has one and they
do not increase down the list; otherwise hit r of n scores n - r.

Per query, like every adapter: an exception is status `error` (a `TimeoutError`, `timeout`) with the
exception's text verbatim; an answer that is not a list of documents (`None`, say), a hit without an
id, with an id retbench cannot write, or (with `check_ids`, the default) with an id that is not in the
indexed corpus makes the whole answer `invalid`, naming the rank. A repeated id (several chunks of one
document) keeps its best rank, and the list is cut to `k` documents after that.

Each query gets `timeout_s` seconds (default 60; null: no deadline): a call still running then is
status `timeout` ("no answer within 60 s (timeout_s)"), never a number. Python cannot stop a thread, so
the late call is abandoned (it runs on, its answer discarded) and a fresh worker takes its place; once
`MAX_ABANDONED` calls hang at once, the queries not yet started are recorded as failed rather than
starting more threads.
"""

from __future__ import annotations

import importlib.util
import numbers
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retbench.data import Corpus, Queries, QueryStatus, Run, RunBuilder
from retbench.data.ids import id_problem, served_scores
from retbench.errors import BackendError, ConfigError, InputError
from retbench.jsontypes import JSONObject, JSONValue
from retbench.retrievers.base import Ranking, Retriever, check_params, clean_ranking, import_object


@dataclass
class Hit:
    """One returned document as the framework gave it: its id (None if it has none) and score (None if none)."""

    doc: Any
    score: float | None


@dataclass
class Outcome:
    """What one query produced: hits, the exception the framework raised, or why its answer is unusable."""

    hits: list[object] | None = None
    failure: BaseException | None = None
    latency: float = 0.0
    invalid: str | None = None
    batch: int = 1  # queries whose shared wall time `latency` is an even share of (1: timed alone)


MAX_ABANDONED = 32  # framework calls hung past timeout_s that may run on (as threads) at once


def answer_outcome(result: object, latency: float, batch: int = 1) -> Outcome:
    """An Outcome from what one framework call returned: its hits, or why they are not a list of documents."""
    if isinstance(result, BaseException):
        return Outcome(failure=result, latency=latency, batch=batch)
    if result is None or isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Sequence):
        return Outcome(
            latency=latency,
            invalid=f"the retriever returned {type(result).__name__}, not a list of documents",
            batch=batch,
        )
    return Outcome(hits=list(result), latency=latency, batch=batch)


class InvalidAnswer(Exception):
    """A framework answer that cannot be recorded (missing or unknown id); the message names the rank."""


def as_score(value: object) -> float | None:
    """A framework's score as a float; None when it gave none (or not a number)."""
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else None


def served_order_ranking(hits: Sequence[Hit], k: int) -> Ranking:
    """(doc, score) for the first k hits, scored so the evaluated order is the served order."""
    hits = list(hits)[:k]
    return [(h.doc, s) for h, s in zip(hits, served_scores([h.score for h in hits]), strict=True)]


class FrameworkRetriever(Retriever):
    """A framework's retriever built by a user factory; subclasses convert documents and hits and run queries."""

    #: the import name of the framework's core package and its distribution name (for the manifest)
    package = ""
    distribution = ""
    #: `module:class` of the framework's retriever base class, and how users usually get one
    base_class = ""
    hint = ""

    @staticmethod
    def check_config(params: Mapping[str, object]) -> None:
        """The values this adapter refuses, checked when a config loads (`retrievers.base.check_system`, before
        any system runs) and again when one is built: a non-positive timeout, concurrency below 1, an empty id_key."""
        timeout_s = params.get("timeout_s")
        if timeout_s is not None and (
            isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0
        ):
            raise ConfigError(
                f"timeout_s must be positive seconds or null, got {timeout_s!r}", field="params.timeout_s"
            )
        concurrency = params.get("concurrency", 1)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(
                f"concurrency must be a whole number >= 1, got {concurrency!r}", field="params.concurrency"
            )
        if not params.get("id_key", "id"):
            raise ConfigError("id_key must be a non-empty metadata key", field="params.id_key")

    def __init__(
        self,
        factory: str,
        params: Mapping[str, Any] | None = None,
        id_key: str = "id",
        concurrency: int = 4,
        check_ids: bool = True,
        score_key: str | None = None,
        name: str | None = None,
        timeout_s: float | None = 60.0,
    ) -> None:
        super().__init__(name)
        self.check_config({"concurrency": concurrency, "timeout_s": timeout_s, "id_key": id_key})
        self.timeout_s = None if timeout_s is None else float(timeout_s)
        if importlib.util.find_spec(self.package) is None:
            raise ConfigError(
                f"the {self.adapter} adapter needs {self.package!r}: pip install 'retbench[frameworks]'",
                field="adapter",
            )
        self.factory_path = factory
        self.factory: Callable[..., object] = import_object(factory, field="params.factory")
        if not callable(self.factory):
            raise ConfigError(f"{factory!r} is not callable", field="params.factory")
        self.params = dict(params or {})
        sig = check_params(self.factory, self.params, what=f"factory {factory!r}", prefix="params.params.")
        self._takes_documents = sig is None or any(
            n == "documents" or p.kind is p.VAR_KEYWORD for n, p in sig.parameters.items()
        )
        self.id_key, self.concurrency, self.check_ids = id_key, int(concurrency), bool(check_ids)
        self.score_key = score_key
        self.retriever: Any = None
        self._corpus_ids: frozenset[str] = frozenset()

    def describe(self) -> JSONObject:
        from importlib.metadata import PackageNotFoundError, version

        try:
            framework = version(self.distribution)
        except PackageNotFoundError:
            framework = None
        return {
            "adapter": self.adapter,
            "factory": self.factory_path,
            "params": self.params,
            "id_key": self.id_key,
            "concurrency": self.concurrency,
            "check_ids": self.check_ids,
            "score_key": self.score_key,
            "timeout_s": self.timeout_s,
            "framework_version": framework,
        }

    def records(self, corpus: Corpus) -> list[tuple[str, str, dict[str, JSONValue]]]:
        """(id, text, metadata with the id under `id_key`) per document; the text as the dense adapter embeds it."""
        metas = corpus.metadata if corpus.metadata is not None else [{}] * len(corpus)
        return [
            (str(i), text, {**dict(m or {}), self.id_key: str(i)})
            for i, text, m in zip(corpus.ids, corpus.joined_texts(), metas, strict=True)
        ]

    # -- what subclasses supply ------------------------------------------------------------------
    @abstractmethod
    def documents(self, corpus: Corpus) -> list[object]:
        """The corpus as the framework's document objects, each carrying its id."""

    def check_retriever(self, obj: object) -> None:
        """Raise ConfigError when the factory returned something that is not the framework's retriever."""
        base = import_object(self.base_class, field="adapter")
        if not isinstance(obj, base):
            raise ConfigError(
                f"factory {self.factory_path!r} returned {type(obj).__name__}, not a {self.base_class} ({self.hint})",
                field="params.factory",
            )

    @abstractmethod
    def set_depth(self, k: int) -> None:
        """Ask the retriever for k hits, where it has a known setting for that."""

    @abstractmethod
    def retrieve(self, texts: list[str]) -> list[Outcome]:
        """Every query through the framework, `concurrency` at a time; never raises for one query."""

    @abstractmethod
    def hit(self, item: object) -> Hit:
        """The id and score of one returned framework object."""

    # -- Retriever -------------------------------------------------------------------------------
    def index(self, corpus: Corpus) -> None:
        """Call the factory (with the corpus as framework documents when it takes them)."""
        self._corpus_ids = frozenset(str(i) for i in corpus.ids)
        kwargs = dict(self.params)
        if self._takes_documents:
            kwargs["documents"] = self.documents(corpus)
        try:
            obj = self.factory(**kwargs)
        except ConfigError:
            raise
        except Exception as exc:
            raise BackendError(f"factory {self.factory_path!r} failed: {type(exc).__name__}: {exc}") from exc
        self.check_retriever(obj)
        self.retriever = obj

    def _require_index(self) -> None:
        if self.retriever is None:
            raise InputError(f"{self.adapter} retriever {self.name!r} has no index; call index() first")

    def ranking(self, items: Sequence[object], k: int) -> Ranking:
        """The validated ranking of one answer, each document once (its best rank), cut to k.

        InvalidAnswer names the first bad rank (counted in the framework's own list).
        """
        unique: list[Hit] = []
        seen: set[str] = set()
        for rank, item in enumerate(items, 1):
            if len(unique) == k:
                break
            h = self.hit(item)
            if h.doc is None:
                raise InvalidAnswer(
                    f"rank {rank}: the document has no {self.id_key!r} in its metadata and no document id"
                )
            doc = str(h.doc) if isinstance(h.doc, int) and not isinstance(h.doc, bool) else h.doc
            problem = id_problem(doc)
            if problem:
                raise InvalidAnswer(f"rank {rank}: {problem}")
            if self.check_ids and doc not in self._corpus_ids:
                raise InvalidAnswer(f"rank {rank}: doc id {doc!r} is not in the indexed corpus")
            if doc not in seen:
                seen.add(doc)
                unique.append(Hit(doc, h.score))
        return clean_ranking(served_order_ranking(unique, k))

    def ask_batch(self, texts: list[str], k: int) -> list[tuple[Ranking | None, Outcome, str | None]]:
        """(ranking or None, outcome, reason it is invalid) for each text."""
        self._require_index()
        self.set_depth(k)
        out: list[tuple[Ranking | None, Outcome, str | None]] = []
        for outcome in self.retrieve(texts):
            if outcome.failure is not None:
                out.append((None, outcome, None))
                continue
            if outcome.invalid is not None:
                out.append((None, outcome, f"invalid answer: {outcome.invalid}"))
                continue
            try:
                out.append((self.ranking(outcome.hits or [], k), outcome, None))
            except InvalidAnswer as exc:
                out.append((None, outcome, f"invalid answer: {exc}"))
        return out

    def search(self, queries: Queries, k: int, *, batch_size: int = 0) -> Run:
        """Every query through the framework; failures and invalid answers recorded per query."""
        qids = list(queries)
        builder = RunBuilder(self.name)
        step = batch_size or len(qids) or 1
        for start in range(0, len(qids), step):
            chunk = qids[start : start + step]
            for qid, (ranking, outcome, invalid) in zip(
                chunk, self.ask_batch([queries[q] for q in chunk], k), strict=True
            ):
                if outcome.failure is not None:
                    exc = outcome.failure
                    status = QueryStatus.TIMEOUT if isinstance(exc, TimeoutError) else QueryStatus.ERROR
                    error = f"{type(exc).__name__}: {exc}"
                    builder.add(qid, status=status, latency=outcome.latency, error=error, batch=outcome.batch)
                elif invalid is not None:
                    builder.add(
                        qid, status=QueryStatus.INVALID, latency=outcome.latency, error=invalid, batch=outcome.batch
                    )
                else:
                    builder.add(qid, ranking or [], latency=outcome.latency, batch=outcome.batch)
        return builder.build()

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        """Rankings for texts; the first failed or invalid answer raises (for callers that only know exceptions)."""
        rankings: list[Ranking] = []
        for ranking, outcome, invalid in self.ask_batch(list(texts), k):
            if outcome.failure is not None:
                raise outcome.failure
            if invalid is not None:
                raise BackendError(invalid)
            rankings.append(ranking or [])
        return rankings


def timed_batch(texts: list[str], run_all: Callable[[list[str]], Sequence[object]]) -> list[Outcome]:
    """Outcomes from a framework's own batch call that returns hits or exceptions; latency is shared evenly.

    A batch call that raises as a whole (rather than returning the exception in that query's place) is
    made again one text at a time, so the failure lands on the query that raised it; each query's latency
    then holds its share of the failed call plus its own call."""
    t0 = time.perf_counter()
    n = max(len(texts), 1)
    try:
        results = list(run_all(texts))
        if len(results) != len(texts):
            raise ValueError(f"the framework's batch returned {len(results)} answers for {len(texts)} queries")
    except Exception as exc:
        wasted = (time.perf_counter() - t0) / n
        if len(texts) <= 1:
            return [Outcome(failure=exc, latency=wasted, batch=len(texts))] * len(texts)
        out = []
        for text in texts:
            t1 = time.perf_counter()
            (one,) = timed_batch([text], run_all)
            one.latency, one.batch = wasted + time.perf_counter() - t1, len(texts)
            out.append(one)
        return out
    each = (time.perf_counter() - t0) / n
    return [answer_outcome(r, each, len(texts)) for r in results]


def pooled(
    texts: list[str], retrieve_one: Callable[[str], object], concurrency: int, timeout_s: float | None = None
) -> list[Outcome]:
    """Outcomes from calling the framework once per text on `concurrency` threads, each query timed alone
    and given `timeout_s` (None: no deadline); see the module docstring for what a late call becomes."""
    n = len(texts)
    results: list[Outcome | None] = [None] * n
    started: list[float | None] = [None] * n
    state = threading.Condition()
    todo = iter(range(n))
    abandoned = 0

    def worker() -> None:
        while True:
            with state:
                i = next(todo, None)
                if i is None:
                    return
                t0 = started[i] = time.perf_counter()
            try:
                out = answer_outcome(retrieve_one(texts[i]), 0.0)
            except Exception as exc:  # recorded per query, never hidden
                out = Outcome(failure=exc)
            out.latency = time.perf_counter() - t0
            with state:
                late = results[i] is not None  # timed out meanwhile: its place was given to a new worker
                if not late:
                    results[i] = out
                state.notify_all()
            if late:
                return

    def spawn() -> None:
        threading.Thread(target=worker, daemon=True, name="retbench-framework").start()

    for _ in range(min(concurrency, n)):
        spawn()
    with state:
        while any(r is None for r in results):
            now = time.perf_counter()
            wait = None
            if timeout_s is not None:
                for i, t0 in enumerate(started):
                    if t0 is None or results[i] is not None:
                        continue
                    if now - t0 < timeout_s:
                        wait = min(wait if wait is not None else timeout_s, t0 + timeout_s - now)
                        continue
                    results[i] = Outcome(
                        failure=TimeoutError(f"no answer within {timeout_s:g} s (timeout_s)"), latency=now - t0
                    )
                    abandoned += 1
                    if abandoned < MAX_ABANDONED:
                        spawn()
                    else:  # no more threads: what has not started is not run
                        for j in todo:
                            results[j] = Outcome(
                                failure=RuntimeError(
                                    f"not run: {abandoned} calls hung past timeout_s (cap {MAX_ABANDONED})"
                                )
                            )
            if all(r is not None for r in results):
                break  # the last pending query just timed out: nothing is left to wait for
            state.wait(wait)
    return [r for r in results if r is not None]
