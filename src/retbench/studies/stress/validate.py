"""The failure taxonomy of one response: ok, short, empty, or a failure (error, timeout, invalid with its kind)."""

from __future__ import annotations

import math
from collections.abc import Container, Sequence
from typing import Any

import numpy as np

from retbench.data import Corpus, QueryStatus

# -- failure taxonomy ------------------------------------------------------------------------------
#: outcomes of one request; only the first three are answers
OUTCOMES = ("ok", "short", "empty", "error", "timeout", "invalid")
FAILURE_OUTCOMES = tuple(s.value for s in QueryStatus if s.failed)  # error, timeout, invalid
#: ways a response can be malformed (the `invalid` outcome's detail)
INVALID_KINDS = ("wrong_type", "non_finite_score", "unknown_id", "duplicate_id")
STATUS_OF = {
    "ok": QueryStatus.OK,
    "short": QueryStatus.OK,
    "empty": QueryStatus.EMPTY,
    "error": QueryStatus.ERROR,
    "timeout": QueryStatus.TIMEOUT,
    "invalid": QueryStatus.INVALID,
}


def check_ranking(
    ranking: object, corpus_ids: Container[str], k: int, corpus_size: int | None = None
) -> tuple[str | None, str]:
    """(kind, explanation) for a raw response; kind None means a full, well-formed ranking.

    Kinds: the INVALID_KINDS (failures), "empty" and "short" (answers that are counted). Problems
    are reported in rank order, the first one found wins.
    """
    if not isinstance(ranking, (list, tuple)):
        return "wrong_type", f"expected a list of (doc_id, score) pairs, got {type(ranking).__name__}"
    if _well_formed(ranking, corpus_ids):
        return _completeness(ranking, corpus_ids, k, corpus_size)
    seen: set[str] = set()
    for rank, item in enumerate(ranking, 1):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            return "wrong_type", f"rank {rank}: expected a (doc_id, score) pair, got {item!r:.80}"
        doc, score = item
        if not isinstance(doc, str):
            return "wrong_type", f"rank {rank}: doc id {doc!r:.80} is a {type(doc).__name__}, not a string"
        if isinstance(score, bool) or not isinstance(score, (int, float, np.integer, np.floating)):
            return "wrong_type", f"rank {rank}: score {score!r:.80} is a {type(score).__name__}, not a number"
        if not math.isfinite(score):
            return "non_finite_score", f"rank {rank}: doc {doc!r} has score {score}"
        if doc not in corpus_ids:
            return "unknown_id", f"rank {rank}: doc id {doc!r} is not in the corpus"
        if doc in seen:
            return "duplicate_id", f"rank {rank}: doc id {doc!r} appears twice"
        seen.add(doc)
    return _completeness(ranking, corpus_ids, k, corpus_size)


def _completeness(
    ranking: Sequence[Any], corpus_ids: Container[str], k: int, corpus_size: int | None
) -> tuple[str | None, str]:
    if not ranking:
        return "empty", "no documents returned"
    size = corpus_size if corpus_size is not None else len(corpus_ids)  # type: ignore[arg-type]
    if len(ranking) < min(k, size):
        return "short", f"{len(ranking)} documents returned, fewer than k={k} from a corpus of {size}"
    return None, ""


def _well_formed(ranking: Sequence[Any], corpus_ids: Container[str]) -> bool:
    """The common case checked in C-level passes: (str, float) pairs, finite, known, distinct.

    False means "look closer" (the rank-by-rank loop finds and explains the problem, or accepts
    NumPy numbers), never "invalid".
    """
    if not ranking:
        return True
    if set(map(type, ranking)) != {tuple} or set(map(len, ranking)) != {2}:
        return False
    docs, scores = zip(*ranking, strict=True)
    if set(map(type, docs)) != {str} or set(map(type, scores)) != {float}:
        return False
    try:
        if not math.isfinite(math.fsum(scores)):
            return False
    except OverflowError:
        return False
    ids = set(docs)
    if len(ids) != len(docs):
        return False
    index = corpus_ids.index if isinstance(corpus_ids, Corpus) else corpus_ids
    if isinstance(index, (set, frozenset, dict)):
        return ids <= index.keys() if isinstance(index, dict) else ids <= index
    return all(map(corpus_ids.__contains__, docs))


def validate_ranking(ranking: object, corpus_ids: Container[str], k: int) -> str | None:
    """The taxonomy label of a raw response, or None when it is a full, well-formed ranking.

    One of INVALID_KINDS (the response is a failure: status `invalid`), or "empty" / "short" (an
    answer, counted in its own rate). `corpus_ids` needs `in` and `len` (a Corpus or a set).
    """
    return check_ranking(ranking, corpus_ids, k)[0]


def is_failure(kind: str | None) -> bool:
    """Whether a `validate_ranking` label (or an outcome) makes the request a failure."""
    return kind in INVALID_KINDS or kind in FAILURE_OUTCOMES
