"""The Retriever interface and the adapter registry.

A Retriever indexes a Corpus and answers Queries with a Run. Optional abilities (incremental `add`,
`delete`, `save`/`load`) are declared in `capabilities` rather than assumed, so the ingestion study
and the stores know what they may call. Adapters return string ids and Python floats, drop
zero-score padding, and never mutate their inputs.

Adapters are found by name (built-ins and `register()`), by the `retbench.retrievers` entry point,
or as `module:factory` for a user's own code.
"""

from __future__ import annotations

import importlib
import inspect
import numbers
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, TypeVar, overload, runtime_checkable

from retbench.config.base import did_you_mean
from retbench.data import Corpus, Queries, QueryStatus, Run, RunBuilder
from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject
from retbench.retrievers.filters import Filter, query_filters, require_filters

Ranking = list[tuple[str, float]]


class CapabilityError(NotImplementedError):
    """Raised when an optional ability (add, delete, save, load) is asked of an adapter without it."""


class PartTimes:
    """Seconds a composite retriever spent in each of its parts (a hybrid's components, its fusion), summed over
    the queries it searched in this process. The parts run inside `search`'s timed batch, so each part's seconds
    are inside the queries' latencies; reports show them as the breakdown of that total."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.queries: dict[str, int] = {}

    def add(self, part: str, seconds: float, queries: int) -> None:
        self.seconds[part] = self.seconds.get(part, 0.0) + seconds
        self.queries[part] = self.queries.get(part, 0) + queries

    def since(self, before: Mapping[str, tuple[float, int]]) -> dict[str, dict[str, float | int]]:
        """{part: {"total_s", "n"}} added after `before` (a `snapshot`)."""
        out: dict[str, dict[str, float | int]] = {}
        for part, s in self.seconds.items():
            s0, n0 = before.get(part, (0.0, 0))
            if self.queries[part] > n0:
                out[part] = {"total_s": s - s0, "n": self.queries[part] - n0}
        return out

    def snapshot(self) -> dict[str, tuple[float, int]]:
        return {p: (s, self.queries[p]) for p, s in self.seconds.items()}


class BatchFallbacks:
    """Batch calls that raised and whose queries were then asked one at a time (`isolate_failures`).

    Kept so that a query answered on its own after its batch failed is never a silent retry: the search
    conditions of a run (`studies/executors.py`) carry these counts and the first batch error verbatim.
    """

    def __init__(self) -> None:
        self.batches = 0
        self.queries = 0
        self.first_error = ""

    def add(self, queries: int, error: str) -> None:
        self.batches += 1
        self.queries += queries
        self.first_error = self.first_error or error

    def snapshot(self) -> tuple[int, int]:
        return self.batches, self.queries


def error_text(exc: BaseException) -> str:
    """How a query's failure is recorded: the exception's type and message verbatim."""
    return f"{type(exc).__name__}: {exc}"


BatchCall = Callable[[Sequence[str], Sequence[Filter | None] | None], list[Ranking]]


def isolate_failures(
    builder: RunBuilder,
    qids: Sequence[str],
    texts: Sequence[str],
    filters: Sequence[Filter | None] | None,
    call: BatchCall,
    fallbacks: BatchFallbacks | None = None,
) -> None:
    """Search one batch into `builder`, a failure landing on the query that raised it.

    The batch is one `call`; when it raises (or answers with the wrong number of rankings) and holds more
    than one query, each query is asked again on its own, so one bad query costs only itself and each
    failing query is recorded with its own exception verbatim. The cost: the failed batch call's time is
    spent for nothing, plus one call per query. Each query's latency is then its own call's time plus its
    even share of the failed batch call (recorded as a batch share, `batch=len(qids)`, so it is never
    read as a per-query measurement). A `TimeoutError` of the whole batch is not asked again query by
    query (that could take a timeout per query): each of its queries is recorded as failed with it.
    """
    n = len(qids)
    t0 = time.perf_counter()
    try:
        rankings = call(texts, filters)
    except Exception as exc:  # a backend failure is recorded, not hidden
        wasted = time.perf_counter() - t0
        if n == 1 or isinstance(exc, TimeoutError):
            for q in qids:
                builder.add(q, status=QueryStatus.ERROR, latency=wasted / n, error=error_text(exc), batch=n)
            return
        if fallbacks is not None:
            fallbacks.add(n, error_text(exc))
        for i, q in enumerate(qids):
            t1 = time.perf_counter()
            try:
                (ranking,) = call([texts[i]], None if filters is None else [filters[i]])
            except Exception as one:
                spent = wasted / n + time.perf_counter() - t1
                builder.add(q, status=QueryStatus.ERROR, latency=spent, error=error_text(one), batch=n)
                continue
            builder.add(q, clean_ranking(ranking), latency=wasted / n + time.perf_counter() - t1, batch=n)
        return
    elapsed = time.perf_counter() - t0
    for q, ranking in zip(qids, rankings, strict=True):
        builder.add(q, clean_ranking(ranking), latency=elapsed / n, batch=n)


@runtime_checkable
class AsyncSearch(Protocol):
    """The method an adapter declaring the "async" capability adds: one query answered on asyncio (stress drives
    such adapters on an event loop; `isinstance(retriever, AsyncSearch)` tells whether it has the method)."""

    async def asearch_one(self, text: str, k: int) -> Ranking: ...


class Retriever(ABC):
    """One retrieval system. Subclasses implement `index` and `search_batch` (or `search_one`)."""

    #: registry name of the adapter
    adapter: str = ""
    #: optional abilities this adapter really has: subset of {"add", "delete", "save", "load", "async", "filters"}
    #: ("filters": queries' `metadata.filter` is applied, see `retrievers/filters.py`)
    capabilities: frozenset[str] = frozenset()
    #: a composite retriever's time per part (None: the retriever is timed as one piece)
    parts: PartTimes | None = None
    #: batch calls that raised and were asked again query by query (None: none yet)
    fallbacks: BatchFallbacks | None = None
    # What the workbench may read from a retriever beyond `index` and `search`, declared here with the value a
    # retriever that has none of it keeps (so nothing probes for an attribute): set the ones your adapter has.
    #: the retriever a wrapper (scope, generate, fault injection, best chunk per document) searches through
    inner: Retriever | None = None
    #: the retrievers a composite fuses (a hybrid's components): their encoders and parts are found through it
    components: Sequence[Retriever] = ()
    #: the embedding encoder a dense retriever or store embeds with (`retrievers.encoders.Encoder`): its cache
    #: statistics and resources are read from it; None: no encoder
    encoder: Any = None
    #: a system that answers (RAG): query id -> its `SystemAnswer`, filled by its search; None: it ranks only
    answers: Mapping[str, Any] | None = None
    #: a scope stage's records (`retrievers.scope.ScopeRecord`), filled by its search; None: no scope stage
    scopes: Mapping[str, Any] | None = None
    #: the index the adapter builds ("flat_ip" is exact inner product; "hnsw", "ivfpq", ... approximate); None: unsaid
    index_type: str | None = None

    def __init__(self, name: str | None = None) -> None:
        self.name = name or self.adapter or type(self).__name__

    def describe(self) -> JSONObject:
        """The configuration that reproduces this retriever (goes into manifests; never secrets)."""
        return {"adapter": self.adapter}

    def fingerprint(self) -> str:
        """A short id of what this retriever would return, e.g. a model hash; '' when unknown."""
        return ""

    @abstractmethod
    def index(self, corpus: Corpus) -> None:
        """Build the index from scratch over `corpus`."""

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        """Rankings for many query texts; the default asks `search_one` for each."""
        return [self.search_one(t, k) for t in texts]

    def search_one(self, text: str, k: int) -> Ranking:
        """Ranking for a single query text; the default goes through `search_batch`."""
        if type(self).search_batch is Retriever.search_batch:
            raise NotImplementedError(f"{type(self).__name__} implements neither search_batch nor search_one")
        return self.search_batch([text], k)[0]

    def search(self, queries: Queries, k: int, *, batch_size: int = 0) -> Run:
        """Answer every query with a Run; per-query latency is the batch time shared evenly.

        A batch of more than one query records its size with each query (`Run.latency_batch`), so
        reports show such latencies as batch means and never as per-query percentiles. An adapter that
        implements only `search_one` is asked, and timed, one query at a time whatever `batch_size` says:
        its batch would be a loop over the same calls, and one query's exception must not fail the rest.

        A failure belongs to the query that raised it, whatever the batching: when a batch call of
        several queries raises, each of its queries is asked again on its own (`isolate_failures`), so
        the failing ones are recorded as errors with their own exception's message verbatim and the others
        are answered. Queries carrying `metadata.filter` go to `search_batch_filtered`; an adapter without
        the "filters" ability refuses them before searching anything.
        """
        builder = RunBuilder(self.name)
        qids = list(queries)
        filters = query_filters(queries, qids)
        require_filters(self, filters)
        filtered = any(f is not None for f in filters)
        one_by_one = type(self).search_batch is Retriever.search_batch and not filtered
        step = 1 if one_by_one else (batch_size or len(qids) or 1)
        for start in range(0, len(qids), step):
            chunk = qids[start : start + step]
            texts = [queries[q] for q in chunk]
            flts = filters[start : start + step] if filtered else None

            def call(texts: Sequence[str], flts: Sequence[Filter | None] | None) -> list[Ranking]:
                got = self.search_batch(texts, k) if flts is None else self.search_batch_filtered(texts, k, flts)
                if len(got) != len(texts):
                    raise ValueError(f"search_batch returned {len(got)} rankings for {len(texts)} queries")
                return got

            if self.fallbacks is None:
                self.fallbacks = BatchFallbacks()
            isolate_failures(builder, chunk, texts, flts, call, self.fallbacks)
        return builder.build()

    # -- optional abilities ---------------------------------------------------------------------
    def search_batch_filtered(self, texts: Sequence[str], k: int, filters: Sequence[Filter | None]) -> list[Ranking]:
        """Rankings restricted to documents passing each query's filter (None: unfiltered)."""
        raise CapabilityError(f"adapter {self.adapter!r} cannot apply metadata filters")

    def add(self, corpus: Corpus) -> None:
        """Add documents to an existing index (incremental ingestion)."""
        raise CapabilityError(f"adapter {self.adapter!r} cannot add documents incrementally")

    def delete(self, ids: Sequence[str]) -> None:
        raise CapabilityError(f"adapter {self.adapter!r} cannot delete documents")

    def save(self, path: str | Path) -> None:
        raise CapabilityError(f"adapter {self.adapter!r} cannot save its index")

    def load(self, path: str | Path) -> None:
        raise CapabilityError(f"adapter {self.adapter!r} cannot load a saved index")

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release servers, clients or files the adapter holds."""


def _as_float(score: Any) -> Any:
    try:
        return float(score)
    except (TypeError, ValueError):
        return score  # left for RunBuilder to record as invalid


def clean_ranking(ranking: Sequence[tuple[Any, Any]]) -> Ranking:
    """Integer ids as strings and scores as Python floats, FAISS's `-1` padding dropped.

    Anything else is passed on unchanged, so that RunBuilder records a null, boolean or container id,
    an id with whitespace, or a non-finite score as an invalid answer instead of writing it.
    """
    out: Ranking = []
    for doc, score in ranking:
        if isinstance(doc, numbers.Integral) and not isinstance(doc, bool):
            if doc < 0:
                continue  # FAISS pads missing neighbours with id -1
            doc = str(int(doc))
        out.append((doc, _as_float(score)))
    return out


# -- registry ----------------------------------------------------------------------------------
Factory = Callable[..., Retriever]
_REGISTRY: dict[str, Factory] = {}


F = TypeVar("F", bound=Factory)


@overload
def register(name: str, factory: F) -> F: ...
@overload
def register(name: str, factory: None = None) -> Callable[[F], F]: ...
def register(name: str, factory: F | None = None) -> F | Callable[[F], F]:
    """Register an adapter factory under a name; usable as a decorator."""

    def deco(f: F) -> F:
        _REGISTRY[name] = f
        return f

    return deco(factory) if factory is not None else deco


# Modules whose import registers built-in adapters; heavy libraries inside them stay lazy. Every module of
# `retrievers/stores/` is one too (`_store_modules`): a new store registers by its file alone.
_BUILTIN_MODULES = (
    "bm25",
    "dense",
    "sparse",
    "hybrid",
    "runfile",
    "frameworks.langchain",
    "frameworks.llamaindex",
)


def _store_modules() -> list[str]:
    """`stores.<name>` for every public module file of `retrievers/stores/`, found without importing them."""
    import pkgutil

    folder = Path(__file__).parent / "stores"
    return sorted(f"stores.{m.name}" for m in pkgutil.iter_modules([str(folder)]) if not m.name.startswith("_"))


def _builtin() -> None:
    import importlib.util

    for mod in (*_BUILTIN_MODULES, *_store_modules()):
        full = f"retbench.retrievers.{mod}"
        try:
            found = importlib.util.find_spec(full) is not None
        except ModuleNotFoundError:  # a parent package that is not there yet
            found = False
        if found:
            importlib.import_module(full)


def available() -> list[str]:
    """Names of every adapter: built-in, registered and installed by entry point."""
    _builtin()
    names = set(_REGISTRY)
    names.update(ep.name for ep in entry_points(group="retbench.retrievers"))
    return sorted(names)


def import_object(path: str, *, field: str) -> Any:
    """The object a `module:attr.sub` path names; a bad path is a ConfigError on `field`."""
    module, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"cannot import module {module!r} ({exc})", field=field) from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"module {module!r} has no attribute {attr!r}", field=field)
        obj = getattr(obj, part)
    return obj


def check_params(
    factory: Callable[..., object], params: Mapping[str, object], *, what: str, where: str = "", prefix: str = ""
) -> inspect.Signature | None:
    """Refuse a parameter the factory does not take, naming the field; returns the signature (None if unknown)."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    extra = getattr(factory, "extra_params", None)  # names a factory takes through **kwargs, if it says
    if extra is not None or not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        valid = [
            n for n, p in sig.parameters.items() if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ] + sorted(extra or ())
        for key in params:
            if key not in valid:
                raise ConfigError(
                    f"unknown parameter {key!r} for {what}; valid: {', '.join(valid) or 'none'}",
                    path=where or None,
                    field=f"{prefix}{key}",
                )
    return sig


def check_system(adapter: str, params: Mapping[str, object], source: str | None, where: str) -> None:
    """The adapter exists and takes every named parameter, with values its `check_config(params)` (when the
    factory has one) accepts: each study runs this on its systems right after loading its config, before any
    work starts, so a bad value is refused before the first system runs (errors name `<where>.adapter` /
    `<where>.params.<key>`)."""
    try:
        factory = resolve_factory(adapter)
    except ConfigError as exc:
        raise ConfigError(exc.reason, path=source, field=f"{where}.adapter") from None
    check_params(factory, params, what=f"adapter {adapter!r}", where=source or "", prefix=f"{where}.params.")
    values = getattr(factory, "check_config", None)  # an adapter's own value rules (e.g. a positive timeout)
    if callable(values):
        try:
            values(params)
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=source, field=f"{where}.{exc.field}" if exc.field else where) from None


def resolve_factory(adapter: str) -> Factory:
    """The factory for an adapter name, entry point, or `module:factory` path."""
    _builtin()
    if adapter in _REGISTRY:
        return _REGISTRY[adapter]
    for ep in entry_points(group="retbench.retrievers"):
        if ep.name == adapter:
            return ep.load()
    if ":" in adapter:
        return import_object(adapter, field="adapter")
    names = available()
    raise ConfigError(
        f"unknown adapter {adapter!r}; available: {', '.join(names)}{did_you_mean(adapter, names)}", field="adapter"
    )


def create(
    adapter: str, params: Mapping[str, object] | None = None, *, name: str | None = None, where: str = ""
) -> Retriever:
    """Build a retriever from a config block, checking parameters against the factory's signature."""
    factory = resolve_factory(adapter)
    params = dict(params or {})
    sig = check_params(factory, params, what=f"adapter {adapter!r}", where=where, prefix="params.")
    if sig is not None and "name" in sig.parameters and name is not None:
        params.setdefault("name", name)
    try:
        retriever = factory(**params)
    except ConfigError:
        raise  # already names its field
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"adapter {adapter!r} rejected its parameters: {exc}", path=where or None, field="params"
        ) from None
    if not isinstance(retriever, Retriever):
        raise ConfigError(
            f"factory for {adapter!r} returned {type(retriever).__name__}, not a Retriever", field="adapter"
        )
    if name is not None:
        retriever.name = name
    return retriever
