"""The retriever contract as a check a plugin author runs in three lines (as PyTerrier ships `pyterrier.testing`).

    from retbench.testing import check_retriever

    def test_my_retriever_keeps_the_contract(my_corpus):
        check_retriever(lambda: MyRetriever(), my_corpus)

What a retriever promises (`retbench.retrievers.base`), checked on the corpus you give:

- `index` then `search` answers every query with a status; every ranking holds at most k distinct ids,
  each one from the corpus, with finite float scores, best first (scores never rise down the ranking);
- a backend failure is recorded per query with its message (status `error`), never dropped or filled in;
- the corpus and the queries are not changed by indexing or searching;
- `describe()` is a JSON object naming the adapter (it goes into manifests);
- only what `capabilities` declares is checked beyond that: `add` (a new document is found by its own text,
  re-adding an id replaces it in place), `delete` (a deleted document never comes back, an unknown id is
  ignored), `save`/`load` (a loaded index answers as the saved one did), `filters` (every returned document
  passes its query's `metadata.filter`).

The `runfile` adapter is outside this contract: it answers query ids from a file it did not build, never a
query text (its own tests check it against the file). Every other built-in adapter passes it in retbench's suite.

Every check raises `ContractError` (an AssertionError, so pytest shows it as a failure) naming the check.
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from retbench.data import Corpus, Queries, QueryStatus
from retbench.retrievers.base import Retriever

#: the replacement text `add` must find; a phrase no ordinary corpus contains twice
PROBE_TEXT = "zygomorphic volcano ash over the orchid greenhouse"


class ContractError(AssertionError):
    """A retriever broke its contract; the message names the check and what was seen."""


def _fail(check: str, detail: str) -> ContractError:
    return ContractError(f"{check}: {detail}")


def default_queries(corpus: Corpus, n: int = 10) -> Queries:
    """Queries made from the corpus itself: the first words of n documents spread over it."""
    step = max(1, len(corpus) // n)
    picks = list(range(0, len(corpus), step))[:n]
    return Queries({f"q{i}": " ".join(corpus.joined(p).split()[:12]) or "query" for i, p in enumerate(picks)})


def _check_ranking(check: str, qid: str, ranking: Sequence[tuple[Any, Any]], k: int, ids: set[str]) -> None:
    if len(ranking) > k:
        raise _fail(check, f"query {qid!r}: {len(ranking)} results for k={k}")
    seen: set[str] = set()
    last = math.inf
    for rank, (doc, score) in enumerate(ranking, 1):
        if not isinstance(doc, str) or doc not in ids:
            raise _fail(check, f"query {qid!r} rank {rank}: {doc!r} is not an id of the corpus")
        if doc in seen:
            raise _fail(check, f"query {qid!r} rank {rank}: {doc!r} is returned twice")
        seen.add(doc)
        if not isinstance(score, float) or not math.isfinite(score):
            raise _fail(check, f"query {qid!r} rank {rank}: score {score!r} is not a finite float")
        if score > last + 1e-6 * max(1.0, abs(last)):
            raise _fail(check, f"query {qid!r} rank {rank}: score {score} is above rank {rank - 1}'s {last}")
        last = score


def _snapshot(corpus: Corpus, queries: Queries) -> Any:
    meta = [dict(m) for m in corpus.metadata] if corpus.metadata is not None else None
    return (
        list(corpus.ids),
        list(corpus.texts),
        list(corpus.titles or []),
        meta,
        dict(queries),
        copy.deepcopy(dict(queries.metadata)),
    )


def _with_metadata(corpus: Corpus) -> Corpus:
    """The corpus with a synthetic `contract_group` field (a, b, c by position) for the filter check."""
    old = list(corpus.metadata) if corpus.metadata is not None else [{} for _ in corpus.ids]
    meta = [{**m, "contract_group": "abc"[i % 3]} for i, m in enumerate(old)]
    return Corpus(list(corpus.ids), list(corpus.texts), list(corpus.titles) if corpus.titles else None, meta)


def check_retriever(
    factory: Callable[[], Retriever],
    corpus: Corpus,
    queries: Queries | None = None,
    *,
    k: int = 10,
    break_backend: Callable[[Retriever], None] | None = None,
) -> list[str]:
    """Run the contract checks on fresh retrievers from `factory`; returns the names of the checks that ran.

    `corpus` should hold at least a few dozen documents; `queries` default to text taken from the corpus.
    `break_backend(retriever)` makes an indexed retriever's backend raise on every query, for the check
    that failures are recorded. Without it the check makes `search_batch` raise, which reaches the backend
    of every adapter that keeps `Retriever.search`; an adapter that overrides `search` needs the hook
    (else the "failures" check is left out of the returned list).
    """
    if len(corpus) < 4:
        raise ValueError("check_retriever needs a corpus of at least 4 documents")
    queries = queries if queries is not None else default_queries(corpus)
    ids = set(corpus.ids)
    passed: list[str] = []
    before = _snapshot(corpus, queries)

    r = factory()
    if not isinstance(r, Retriever):
        raise _fail("factory", f"returned {type(r).__name__}, not a retbench Retriever")
    try:
        described = r.describe()
        if not isinstance(described, dict) or "adapter" not in described:
            raise _fail("describe", f"expected a dict naming the adapter, got {described!r}")
        try:
            json.dumps(described)
        except (TypeError, ValueError) as exc:
            raise _fail("describe", f"not JSON: {exc}") from None
        passed.append("describe")

        r.index(corpus)
        run = r.search(queries, k)
        bad = {q: s for q, s in run.status.items() if s not in (QueryStatus.OK, QueryStatus.EMPTY)}
        if list(run) != list(queries) or bad:
            raise _fail("search", f"every query answered with ok/empty; got {bad or list(run)} ({run.errors})")
        texts = [queries[q] for q in queries]
        for qid, ranking in zip(queries, r.search_batch(texts, k), strict=True):
            _check_ranking("rankings", qid, ranking, k, ids)
        passed += ["search", "rankings"]

        if _snapshot(corpus, queries) != before:
            raise _fail("inputs", "indexing or searching changed the corpus or the queries")
        passed.append("inputs")

        if break_backend is not None or type(r).search is Retriever.search:
            _check_failures_recorded(r, queries, k, break_backend)
            passed.append("failures")
    finally:
        r.close()

    if "save" in r.capabilities and "load" in r.capabilities:
        _check_save_load(factory, corpus, queries, k)
        passed.append("save/load")
    if "add" in r.capabilities:
        _check_add(factory, corpus, k, ids, deletes="delete" in r.capabilities)
        passed.append("add" + ("/replace/delete" if "delete" in r.capabilities else "/replace"))
    if "filters" in r.capabilities:
        _check_filters(factory, corpus, queries, k)
        passed.append("filters")
    return passed


def backend_down(*args: Any, **kwargs: Any) -> Any:
    """What a broken backend does: raise, with a message the check looks for in the recorded errors."""
    raise RuntimeError("contract probe: backend down")


def _check_failures_recorded(
    r: Retriever, queries: Queries, k: int, break_backend: Callable[[Retriever], None] | None
) -> None:
    """With the backend raising, search() records every query as an error with the message.

    Runs last on this retriever (which is closed after it): the broken backend is left in place.
    """
    if break_backend is not None:
        break_backend(r)
    else:
        r.search_batch = backend_down  # type: ignore[method-assign]
    try:
        run = r.search(queries, k)
    except Exception as exc:
        raise _fail(
            "failures", f"search() raised instead of recording the failure: {type(exc).__name__}: {exc}"
        ) from None
    # the probe's own message must come through verbatim; a real break (the hook) must leave some message
    needle = "backend down" if break_backend is None else ""
    failed = (QueryStatus.ERROR, QueryStatus.TIMEOUT)
    statuses = run.status
    missing = [
        q
        for q in queries
        if statuses.get(q) not in failed or needle not in run.errors.get(q, "") or not run.errors.get(q, "").strip()
    ]
    if missing:
        raise _fail("failures", f"queries not recorded as errors with the backend's message: {missing[:5]}")


def _check_save_load(factory: Callable[[], Retriever], corpus: Corpus, queries: Queries, k: int) -> None:
    a, b = factory(), factory()
    try:
        a.index(corpus)
        want = a.search(queries, k)
        with tempfile.TemporaryDirectory(prefix="retbench-contract-") as folder:
            a.save(folder)
            b.load(folder)
            got = b.search(queries, k)
        for q in queries:
            if got.docs(q) != want.docs(q):
                raise _fail(
                    "save/load", f"query {q!r}: loaded index answers {got.docs(q)[:5]}, saved {want.docs(q)[:5]}"
                )
    finally:
        a.close()
        b.close()


def _check_add(factory: Callable[[], Retriever], corpus: Corpus, k: int, ids: set[str], deletes: bool) -> None:
    half = len(corpus) // 2
    first, rest = corpus.subset(corpus.ids[:half]), corpus.subset(corpus.ids[half:])
    r = factory()
    try:
        r.index(first)
        r.add(rest)
        target = rest.ids[0]
        top = [d for d, _ in r.search_one(rest.joined(0), 3)]
        if target not in top:
            raise _fail("add", f"document {target!r} added after indexing is not in the top 3 for its own text: {top}")
        size = len(r) if hasattr(r, "__len__") else None
        if size is not None and size != len(corpus):
            raise _fail("add", f"{size} documents after adding, expected {len(corpus)}")
        r.add(Corpus([target], [PROBE_TEXT], [""], [dict(rest.metadata[0])] if rest.metadata is not None else None))
        found = r.search_one(PROBE_TEXT, 1)
        if not found or found[0][0] != target:
            raise _fail("replace", f"re-added {target!r} is not found first by its new text: {found}")
        if hasattr(r, "__len__") and len(r) != len(corpus):
            raise _fail("replace", f"re-adding an id changed the count to {len(r)} (expected {len(corpus)}: replaced)")
        if deletes:
            r.delete([target, "retbench-contract-no-such-id"])
            if hasattr(r, "__len__") and len(r) != len(corpus) - 1:
                raise _fail("delete", f"{len(r)} documents after deleting one of {len(corpus)}")
            back = [d for d, _ in r.search_one(PROBE_TEXT, len(corpus))]
            if target in back:
                raise _fail("delete", f"deleted document {target!r} came back")
    finally:
        r.close()


def _check_filters(factory: Callable[[], Retriever], corpus: Corpus, queries: Queries, k: int) -> None:
    tagged = _with_metadata(corpus)
    group = {d: m["contract_group"] for d, m in zip(tagged.ids, tagged.metadata or [], strict=True)}
    flt = Queries(dict(queries), {q: {"filter": {"contract_group": "abc"[i % 3]}} for i, q in enumerate(queries)})
    r = factory()
    try:
        r.index(tagged)
        run = r.search(flt, k)
    finally:
        r.close()
    for i, q in enumerate(queries):
        if run.status.get(q) not in (QueryStatus.OK, QueryStatus.EMPTY):
            raise _fail("filters", f"query {q!r}: {run.status.get(q)} {run.errors.get(q, '')}")
        wrong = [d for d in run.docs(q) if group[d] != "abc"[i % 3]]
        if wrong:
            raise _fail("filters", f"query {q!r}: {wrong[:5]} fail the filter contract_group = {'abc'[i % 3]!r}")
