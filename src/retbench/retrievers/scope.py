"""The scope stage: pick a folder or metadata scope from the query, then search inside it.

RAG systems over note vaults and document trees often choose a folder first and search only there; when
that choice is wrong, recall dies silently. A system's `scope:` block declares the stage:

    scope: {selector: folder_of_query, folder_mode: on_with_fallback}

- `selector` picks a scope from (query text, query metadata) and returns a filter mapping in the language of
  `retrievers/filters.py` (or None: no scope, the whole corpus):
  `folder_of_query` reads the query's `metadata.folder` (scope `{"folder": <it>}`); `metadata` reads the
  query's `metadata.scope` (any filter mapping); `module:function` names the user's own function
  `(query_text, query_metadata) -> mapping | None`. A selector that raises for a query fails that query
  alone (status `error`, its exception's message verbatim); every other query is still searched.
- The filter is matched against each document's *scope view*: its metadata plus `rel_path` (its metadata's
  `rel_path`, else its metadata's `doc_id` (a chunk's document, `ChunkSet.to_corpus`), else its id), `folder` (the directory part of rel_path, "" at the top) and `type` (its metadata's
  `type`, else rel_path's file extension without the dot).
- `folder_mode`: `off` (no stage: the system searches everything), `on` (search inside the scope only),
  `on_with_fallback` (a query whose scoped search returned no document is searched again over everything;
  both searches are recorded).

A retriever with the "filters" ability applies the scope itself (its exact filtered search); any other is
asked for deeper rankings (4x, 16x, ... of k) until k in-scope documents are found or the ranking ends,
so for an exact retriever (BM25, a flat dense index) the result equals a search over the scope alone.

Each query's `ScopeRecord` (the scope chosen, the documents the scoped search returned, whether it fell
back, the selector's own seconds) is journaled with its ranking and written to status.jsonl, and the
`scope_miss_rate` metric (metrics/scope.py) is computed from the scope chosen *before* any fallback.
A query's latency holds every part of it: the selector's seconds plus every search it took (each deeper
ask, and the unscoped search of a fallback), so a scoped system's latency compares with an unscoped one's.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from retbench.config.experiment import ScopeBlock
from retbench.data import Corpus, Queries, QueryStatus, Run, RunBuilder
from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import Retriever, error_text, import_object
from retbench.retrievers.filters import Filter, parse_filter

FolderMode = Literal["off", "on", "on_with_fallback"]
#: a selector: (query text, query metadata) -> a filter mapping, or None for no scope
Selector = Callable[[str, Mapping[str, object]], Mapping[str, object] | None]
DEEPEN = 4  # each deeper ask multiplies the depth by this


def scope_view(doc_id: str, metadata: Mapping[str, object] | None) -> dict[str, object]:
    """The fields a scope filter sees for one document (module docstring)."""
    meta = dict(metadata or {})
    rel = str(meta.get("rel_path") or meta.get("doc_id") or doc_id)  # a chunk's: its document's (to_corpus)
    ext = posixpath.splitext(rel)[1].lstrip(".").lower()
    return {**meta, "rel_path": rel, "folder": posixpath.dirname(rel), "type": str(meta.get("type") or ext)}


def document_type(doc_id: str, metadata: Mapping[str, object] | None) -> str:
    """A document's type for breakdowns: its metadata `type`, else its rel_path's extension ("" if none)."""
    return str(scope_view(doc_id, metadata)["type"])


def corpus_views(corpus: Corpus) -> dict[str, dict[str, object]]:
    """Doc id -> scope view, over a whole corpus."""
    meta = corpus.metadata
    return {d: scope_view(d, meta[i] if meta is not None else None) for i, d in enumerate(corpus.ids)}


@dataclass(frozen=True)
class ScopeRecord:
    """One query's scope stage: the filter chosen (None: no scope), how many documents the scoped search
    returned, whether the query was searched again unscoped, and the selector's seconds."""

    scope: Mapping[str, object] | None
    scoped_n: int
    fallback: bool = False
    latency: Mapping[str, float] = field(
        default_factory=dict
    )  # {"scope": seconds}, as stage_latency reads; {}: unknown

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scope": dict(self.scope) if self.scope is not None else None,
            "scoped_n": self.scoped_n,
            "fallback": self.fallback,
        }
        if "scope" in self.latency:  # unknown (a service that reports only its choice): left out, never 0
            out["seconds"] = round(float(self.latency["scope"]), 6)
        return out

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> ScopeRecord:
        seconds = obj.get("seconds")
        return cls(
            obj.get("scope"),
            int(obj.get("scoped_n", 0)),
            bool(obj.get("fallback")),
            {} if seconds is None else {"scope": float(seconds)},
        )

    def includes(self, view: Mapping[str, object] | None) -> bool:
        """Is a document (its scope view; None: unknown document) inside the chosen scope?"""
        f = parse_filter(self.scope, where="scope")
        return f is None or (view is not None and f.matches(view))


def _folder_of_query(text: str, meta: Mapping[str, object]) -> Mapping[str, object] | None:
    folder = meta.get("folder")
    return None if folder is None else {"folder": str(folder)}


def _metadata(text: str, meta: Mapping[str, object]) -> Mapping[str, object] | None:
    scope = meta.get("scope")
    return scope if isinstance(scope, Mapping) else None


SELECTORS: dict[str, Selector] = {"folder_of_query": _folder_of_query, "metadata": _metadata}


def resolve_selector(name: str) -> Selector:
    """A built-in selector by name, or the user's `module:function`."""
    if name in SELECTORS:
        return SELECTORS[name]
    if ":" in name:
        fn = import_object(name, field="scope.selector")
        if not callable(fn):
            raise ConfigError(f"{name!r} is not callable", field="scope.selector")
        return fn  # type: ignore[no-any-return]
    raise ConfigError(
        f"unknown scope selector {name!r}; expected {', '.join(SELECTORS)} or module:function", field="scope.selector"
    )


class ScopedRetriever(Retriever):
    """A retriever searched inside the scope its selector picks per query (module docstring)."""

    inner: Retriever  # always a wrapper

    def __init__(self, inner: Retriever, selector: str, folder_mode: FolderMode = "on") -> None:
        super().__init__(inner.name)
        self.inner, self.selector_name, self.folder_mode = inner, selector, folder_mode
        self.select = resolve_selector(selector)
        self.adapter = inner.adapter
        self.capabilities = frozenset(inner.capabilities) & {"save", "load"}
        self.scopes: dict[str, ScopeRecord] = {}
        self._views: dict[str, dict[str, object]] = {}

    def describe(self) -> JSONObject:
        return {**self.inner.describe(), "scope": {"selector": self.selector_name, "folder_mode": self.folder_mode}}

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def index(self, corpus: Corpus) -> None:
        self._views = corpus_views(corpus)
        self.inner.index(corpus)

    def save(self, path: str | Path) -> None:
        self.inner.save(path)

    def load(self, path: str | Path) -> None:
        self.inner.load(path)

    def close(self) -> None:
        self.inner.close()

    def choose(self, queries: Queries) -> dict[str, tuple[Filter | None, float, str | None]]:
        """Each query's scope filter, the selector's seconds and the selector's error (None: it chose).

        A selector that raises for a query fails that query alone (its exception recorded verbatim); a
        mapping that is not a filter is a config error that names the query."""
        out: dict[str, tuple[Filter | None, float, str | None]] = {}
        for q in queries:
            t0 = time.perf_counter()
            try:
                spec = self.select(queries[q], queries.metadata.get(q) or {})
            except Exception as exc:  # the user's selector failed on this query: recorded, never hidden
                out[q] = (None, time.perf_counter() - t0, f"scope selector {self.selector_name}: {error_text(exc)}")
                continue
            out[q] = (parse_filter(spec, where=f"query {q}: scope"), time.perf_counter() - t0, None)
        return out

    def search(self, queries: Queries, k: int, *, batch_size: int = 0) -> Run:
        chosen = self.choose(queries)
        live = [q for q in queries if chosen[q][2] is None]
        scoped = [q for q in live if chosen[q][0] is not None]
        plain = self.inner.search(queries.subset(q for q in live if chosen[q][0] is None), k, batch_size=batch_size)
        inside = self._scoped(queries.subset(scoped), {q: chosen[q][0] for q in scoped}, k, batch_size)  # type: ignore[misc]
        empty = [
            q
            for q in scoped
            if inside.status[q] is QueryStatus.EMPTY or (inside.status[q] is QueryStatus.OK and not inside.docs(q))
        ]
        again = (
            self.inner.search(queries.subset(empty), k, batch_size=batch_size)
            if self.folder_mode == "on_with_fallback" and empty
            else None
        )
        builder = RunBuilder(self.name)
        for q in queries:
            f, seconds, failure = chosen[q]
            if failure is not None:
                builder.add(q, status=QueryStatus.ERROR, latency=seconds, error=failure)
                continue
            src = plain if f is None else (again if again is not None and q in empty else inside)
            # a query's latency holds every part: choosing its scope and each search it took (a fallback's too)
            passes = [r for r in (plain if f is None else inside, again if src is again else None) if r is not None]
            builder.add(
                q,
                src.ranking(q),
                status=src.status[q],
                latency=seconds + sum(r.latency.get(q, 0.0) for r in passes),
                error=src.errors.get(q),
                batch=max((r.latency_batch.get(q, 1) for r in passes), default=1),
            )
            n = len(inside.docs(q)) if f is not None else len(plain.docs(q))
            self.scopes[q] = ScopeRecord(None if f is None else f.as_dict(), n, src is again, {"scope": seconds})
        return builder.build()

    def _scoped(self, queries: Queries, filters: Mapping[str, Filter], k: int, batch_size: int) -> Run:
        """Each query's ranking inside its scope: the inner filtered search, else deepening post-filter."""
        if not queries:
            return Run.empty(self.name)
        if "filters" in self.inner.capabilities:
            meta = {q: {**(queries.metadata.get(q) or {}), "filter": filters[q].as_dict()} for q in queries}
            return self.inner.search(Queries({q: queries[q] for q in queries}, meta), k, batch_size=batch_size)
        total = max(len(self._views), 1)
        ask, todo, runs = min(k * DEEPEN, total), list(queries), {}
        spent: dict[str, float] = {}  # every deepening pass's seconds count
        batch: dict[str, int] = {}
        while todo:
            found = self.inner.search(queries.subset(todo), ask, batch_size=batch_size)
            runs.update({q: found for q in todo})
            for q in todo:
                spent[q] = spent.get(q, 0.0) + found.latency.get(q, 0.0)
                batch[q] = max(batch.get(q, 1), found.latency_batch.get(q, 1))
            todo = [
                q
                for q in todo
                if len(found.docs(q)) >= ask and ask < total and len(self._keep(found, q, filters[q], k)) < k
            ]
            ask = min(ask * DEEPEN, total)
        builder = RunBuilder(self.name)
        for q in queries:
            run = runs[q]
            builder.add(
                q,
                self._keep(run, q, filters[q], k),
                status=_status(run, q),
                latency=spent[q],
                error=run.errors.get(q),
                batch=batch[q],
            )
        return builder.build()

    def _keep(self, run: Run, q: str, f: Filter, k: int) -> list[tuple[str, float]]:
        return [(d, s) for d, s in run.ranking(q) if f.matches(self._views.get(d))][:k]


def with_scope(retriever: Retriever, block: ScopeBlock | None) -> Retriever:
    """The retriever behind its scope stage when the system declares one (folder_mode not off), else itself."""
    if block is None or block.folder_mode == "off":
        return retriever
    return ScopedRetriever(retriever, block.selector, block.folder_mode)


def _status(run: Run, q: str) -> QueryStatus | None:
    """Failures stay as they were; an ok answer takes the status of what is left in scope (None: RunBuilder's rule)."""
    s = run.status[q]
    return None if s is QueryStatus.OK else s


def scope_in_scope(
    records: Mapping[str, ScopeRecord], views: Mapping[str, Mapping[str, object]]
) -> dict[str, Callable[[str], bool]]:
    """Query id -> "is this doc id inside the scope chosen for it?" (what `scope_miss_rate` reads)."""
    return {q: partial(_includes, r, views) for q, r in records.items()}


def _includes(record: ScopeRecord, views: Mapping[str, Mapping[str, object]], doc_id: str) -> bool:
    return record.includes(views.get(doc_id))
