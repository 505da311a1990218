"""The retriever contract as a check a plugin author runs in three lines (as PyTerrier ships `pyterrier.testing`).

    from retbench.testing import check_retriever

    def test_my_retriever_keeps_the_contract(my_corpus):
        check_retriever(lambda: MyRetriever(), my_corpus)

What a retriever promises (`retbench.retrievers.base`), checked on the corpus you give:

- `search_batch` returns one ranking per query text, each a sequence of (doc id, score) pairs;
- `index` then `search` answers every query with a status; every ranking holds at most k distinct ids,
  each one from the corpus, with finite float scores, best first (scores never rise down the ranking);
- a query made of a document's own words finds something ("answers": a retriever that answers nothing at
  all would otherwise pass, every query reading as "nothing relevant");
- a backend failure is recorded per query with its message (status `error`), never dropped or filled in;
- a failure is never hidden as an empty answer ("hidden failures"): a fresh retriever is indexed, answers
  those queries, is closed (its backend released, as when a server goes away) and asked again; each query
  must then be answered as before or recorded as failed, never answered with nothing;
- the corpus and the queries are not changed by indexing or searching;
- `describe()` is a JSON object naming the adapter (it goes into manifests);
- only what `capabilities` declares is checked beyond that: `add` (a new document is found by its own text,
  re-adding an id replaces it in place), `delete` (a deleted document never comes back, an unknown id is
  ignored), `save`/`load` (a loaded index answers as the saved one did), `filters` (every returned document
  passes its query's `metadata.filter`).

The `runfile` adapter is outside this contract: it answers query ids from a file it did not build, never a
query text (its own tests check it against the file). Every other built-in adapter passes it in retbench's suite.

Every violation raises `ContractError` (an AssertionError, so pytest shows it as a failure) naming the check,
including an exception the retriever raises where it should answer (`search: search_batch raised ...`).
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from retbench.data import Corpus, Queries, QueryStatus
from retbench.errors import InputError
from retbench.retrievers.base import Retriever

#: the checks every retriever goes through, in order (the abilities it declares add theirs after these)
CORE_CHECKS = ("describe", "search", "rankings", "answers", "inputs", "failures", "hidden failures")

#: the replacement text `add` must find; a phrase no ordinary corpus contains twice
PROBE_TEXT = "zygomorphic volcano ash over the orchid greenhouse"


class ContractError(AssertionError):
    """A retriever broke its contract; the message names the check and what was seen."""


def _fail(check: str, detail: str) -> ContractError:
    return ContractError(f"{check}: {detail}")


@contextmanager
def _checking(check: str) -> Iterator[None]:
    """Any exception the retriever raises inside a check is that check's violation, not a crash of the kit."""
    try:
        yield
    except ContractError:
        raise
    except Exception as exc:
        raise _fail(check, f"the retriever raised {type(exc).__name__}: {exc}") from exc


def default_queries(corpus: Corpus, n: int = 10) -> Queries:
    """Queries made from the corpus itself: the first words of n documents spread over it."""
    step = max(1, len(corpus) // n)
    picks = list(range(0, len(corpus), step))[:n]
    return Queries({f"q{i}": " ".join(corpus.joined(p).split()[:12]) or "query" for i, p in enumerate(picks)})


def _check_batch(texts: list[str], got: Any) -> list[Sequence[Any]]:
    """`search_batch`'s answer as one ranking per text, each a sequence of (doc id, score) pairs."""
    if isinstance(got, (str, bytes)) or not isinstance(got, Sequence):
        raise _fail("search", f"search_batch returned {type(got).__name__} for {len(texts)} queries, not a list")
    if len(got) != len(texts):
        raise _fail("search", f"search_batch returned {len(got)} rankings for {len(texts)} queries")
    for i, ranking in enumerate(got):
        if isinstance(ranking, (str, bytes)) or not isinstance(ranking, Sequence):
            raise _fail("search", f"ranking {i + 1} is {type(ranking).__name__}, not a list of (doc id, score)")
        for rank, pair in enumerate(ranking, 1):
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise _fail("search", f"ranking {i + 1} rank {rank}: {pair!r:.60} is not a (doc id, score) pair")
    return list(got)


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
        raise InputError("check_retriever needs a corpus of at least 4 documents", field="corpus")
    queries = queries if queries is not None else default_queries(corpus)
    probe = default_queries(corpus, 5)
    ids = set(corpus.ids)
    passed: list[str] = []
    before = _snapshot(corpus, queries)

    with _checking("factory"):
        r = factory()
    if not isinstance(r, Retriever):
        raise _fail("factory", f"returned {type(r).__name__}, not a retbench Retriever")
    try:
        _check_describe(r)
        passed.append("describe")
        with _checking("index"):
            r.index(corpus)
        texts = [queries[q] for q in queries]
        with _checking("search"):
            rankings = _check_batch(texts, r.search_batch(texts, k))
            run = r.search(queries, k)
        bad = {q: s for q, s in run.status.items() if s not in (QueryStatus.OK, QueryStatus.EMPTY)}
        if list(run) != list(queries) or bad:
            raise _fail("search", f"every query answered with ok/empty; got {bad or list(run)} ({run.errors})")
        for qid, ranking in zip(queries, rankings, strict=True):
            _check_ranking("rankings", qid, ranking, k, ids)
        passed += ["search", "rankings"]
        with _checking("answers"):
            _check_answers("answers", r.search(probe, k), probe)
        passed.append("answers")

        if _snapshot(corpus, queries) != before:
            raise _fail("inputs", "indexing or searching changed the corpus or the queries")
        passed.append("inputs")

        if break_backend is not None or type(r).search is Retriever.search:
            with _checking("failures"):
                _check_failures_recorded(r, queries, k, break_backend)
            passed.append("failures")
    finally:
        with _checking("close"):
            r.close()

    with _checking("hidden failures"):
        _check_nothing_hidden(factory, corpus, probe, k)
    passed.append("hidden failures")
    caps = r.capabilities
    optional: list[tuple[str, Callable[[], None]]] = []
    if "save" in caps and "load" in caps:
        optional.append(("save/load", lambda: _check_save_load(factory, corpus, queries, k)))
    if "add" in caps:
        deletes = "delete" in caps
        name = "add/replace/delete" if deletes else "add/replace"
        optional.append((name, lambda: _check_add(factory, corpus, k, ids, deletes=deletes)))
    if "filters" in caps:
        optional.append(("filters", lambda: _check_filters(factory, corpus, queries, k)))
    for name, run_check in optional:
        with _checking(name.split("/")[0]):
            run_check()
        passed.append(name)
    return passed


def _check_describe(r: Retriever) -> None:
    with _checking("describe"):
        described = r.describe()
    if not isinstance(described, dict) or "adapter" not in described:
        raise _fail("describe", f"expected a dict naming the adapter, got {described!r}")
    try:
        json.dumps(described)
    except (TypeError, ValueError) as exc:
        raise _fail("describe", f"not JSON: {exc}") from None


def _check_answers(check: str, run: Any, probe: Queries) -> None:
    """Each probe query (a document's own first words) is answered with at least one document."""
    for q in probe:
        if run.status.get(q) != QueryStatus.OK or not run.docs(q):
            detail = run.errors.get(q, "") or "no document"
            raise _fail(
                check,
                f"query {q!r} ({probe[q][:60]!r}), made of a corpus document's own words, got {run.status.get(q)}: "
                f"{detail}",
            )


def _check_nothing_hidden(factory: Callable[[], Retriever], corpus: Corpus, probe: Queries, k: int) -> None:
    """Backend down: a closed retriever answers each probe query as before or records it as failed.

    Closing releases what the retriever holds (clients, connections, indexes, servers' collections); an
    adapter whose `close` releases nothing answers as before and passes. What may not happen is an empty
    answer: that is a failure hidden as "nothing relevant", which would score as a bad system, not a broken one.
    """
    r = factory()
    try:
        r.index(corpus)
        _check_answers("hidden failures", r.search(probe, k), probe)
        r.close()
        after = r.search(probe, k)
    finally:
        r.close()
    failed = (QueryStatus.ERROR, QueryStatus.TIMEOUT)
    for q in probe:
        status = after.status.get(q)
        if status in failed and not after.errors.get(q, "").strip():
            raise _fail("hidden failures", f"query {q!r} failed after close() with no message")
        if status not in failed and (status != QueryStatus.OK or not after.docs(q)):
            raise _fail(
                "hidden failures",
                f"after close() query {q!r} was answered {status} with nothing instead of being recorded as "
                "failed: a failing backend is hidden as an empty answer",
            )


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
