"""What a search was measured under, so its latencies can be read: which encoders a retriever uses, the query
vectors encoded into the cache before timing (`warm_query_vectors`), how many came from the cache, the seconds
of each part of a composite retriever, and the batches asked again query by query after they raised.

Both executors (`studies.executors`) call these around every search they time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from retbench.retrievers.base import BatchFallbacks, PartTimes, Retriever
from retbench.retrievers.encoders import Encoder


def encoders_of(retriever: Retriever) -> list[Encoder]:
    """Every embedding encoder a retriever uses (a hybrid's components included), once each."""
    found: list[Encoder] = []
    stack: list[Retriever] = [retriever]
    while stack:
        r = stack.pop()
        enc = r.encoder
        if isinstance(enc, Encoder) and all(enc is not e for e in found):
            found.append(enc)
        stack.extend(r.components)
        if r.inner is not None:  # a scope or generate wrapper's retriever
            stack.append(r.inner)
    return found


def _query_encodes(retriever: Retriever) -> tuple[int, int] | None:
    """(query texts run through a model, answered from the embedding cache) so far; None without an encoder."""
    encoders = encoders_of(retriever)
    if not encoders:
        return None
    roles = [e.stats.by_role["query"] for e in encoders]
    return sum(r["encoded"] for r in roles), sum(r["cached"] for r in roles)


def _parts_of(retriever: Retriever) -> PartTimes | None:
    """The part times of the retriever or of the retriever a scope or generate wrapper holds."""
    for r in (retriever, retriever.inner):
        if r is not None and r.parts is not None:
            return r.parts
    return None


def fallbacks_of(retriever: Retriever) -> list[BatchFallbacks]:
    """The batch-fallback counters of the retriever and of the retriever a wrapper (scope, generate) holds."""
    out: list[BatchFallbacks] = []
    for r in (retriever, retriever.inner):
        if r is not None:
            if r.fallbacks is None:
                r.fallbacks = BatchFallbacks()
            out.append(r.fallbacks)
    return out


def fallback_figures(retriever: Retriever, before: Sequence[tuple[int, int]]) -> dict[str, object]:
    """{"batch_fallbacks": batches that raised and were asked again one query at a time, the queries in them,
    and the first such batch error verbatim}, counted since `before`; {} when none did (`base.isolate_failures`)."""
    now = fallbacks_of(retriever)
    batches = sum(f.batches - b[0] for f, b in zip(now, before, strict=True))
    if not batches:
        return {}
    queries = sum(f.queries - b[1] for f, b in zip(now, before, strict=True))
    first = next((f.first_error for f in now if f.first_error), "")
    return {"batch_fallbacks": {"batches": batches, "queries": queries, "first_error": first}}


#: queries encoded, bypassing the cache, to measure an encoder's per-query cost when the warm-up found every
#: query vector cached (a small sample: the rate, not the vectors, is wanted)
RATE_SAMPLE = 16


def warm_query_vectors(retriever: Retriever, texts: Sequence[str]) -> dict[str, object]:
    """Encode `texts` as queries into the embedding cache of every encoder the retriever uses, before any
    search is timed, so every system and every tuning setting is timed with the same, warm query-vector
    cache: which system ran first no longer decides its latency. A query's latency therefore never holds
    the encoding of its query; the warm-up's own seconds are recorded beside it (`query_warmup`), not in it.
    An encoder without a cache (`cache: false`) encodes inside every search, so every system is timed cold.

    `encode_seconds_per_query`: what encoding one query costs with these encoders, whatever the cache held
    (costs price it): a `RATE_SAMPLE`-query batch encoded without the cache, timed on its second encode, per
    query. None where an encoder is a hosted API (its calls, not machine seconds, are its cost)."""
    from retbench.retrievers.encoders.http import HttpEncoder  # deferred with the encoders (start-up time)

    encoders = [e for e in encoders_of(retriever) if e.use_cache]
    if not encoders or not texts:
        return {}
    t0, encoded, per_query = time.perf_counter(), 0, 0.0
    hosted = False
    for enc in encoders:
        before = enc.stats.by_role["query"]["encoded"]
        enc.encode(list(texts), "query")
        encoded += enc.stats.by_role["query"]["encoded"] - before
        if isinstance(enc, HttpEncoder):
            hosted = True
            continue
        # timed apart from the warm-up, which the cache may have spared; the same batch is encoded once untimed
        # first: that call loads the model and pays the framework's first-batch costs (several times a batch)
        sample = list(texts[:RATE_SAMPLE])
        enc._encode_batch(sample, "query")
        t_sample = time.perf_counter()
        enc._encode_batch(sample, "query")
        per_query += (time.perf_counter() - t_sample) / len(sample)
    seconds = time.perf_counter() - t0
    rate_s = None if hosted else per_query
    return {
        "query_warmup": {
            "encoded": encoded,
            "of": len(texts) * len(encoders),
            "seconds": seconds,
            "encode_seconds_per_query": rate_s,
        }
    }


def search_conditions(retriever: Retriever, search: Callable[[], None]) -> dict[str, object]:
    """Run `search` in this process and say what its latencies were measured under: how many query vectors
    came from the embedding cache (a warm cache makes a dense search look fast), the seconds of each part
    of a composite retriever (`PartTimes`) and the batches asked again query by query after they raised,
    all counted over this search alone."""
    encodes, parts = _query_encodes(retriever), _parts_of(retriever)
    before = parts.snapshot() if parts is not None else {}
    fell = [f.snapshot() for f in fallbacks_of(retriever)]
    search()
    out: dict[str, object] = fallback_figures(retriever, fell)
    after = _query_encodes(retriever)
    if encodes is not None and after is not None:
        out["query_vectors"] = {"encoded": after[0] - encodes[0], "from_cache": after[1] - encodes[1]}
    if parts is not None:
        out["parts"] = parts.since(before)
    return out
