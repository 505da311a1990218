"""The rules an id and a score must meet, checked where data enters (files, Python mappings, backends'
answers), each check one C-speed pass when all is well and a walk that names the entry only when not.

The 64-bit keys that stand in for ids read from files, and the hash passes over them, are in `data.keys`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, pairwise, repeat
from typing import Any

import numpy as np

__all__ = [
    "answer_problem",
    "first_bad_id",
    "id_problem",
    "python_mapping_problem",
    "python_value_problem",
    "rankings_problem",
    "score_problem",
    "shown",
]

# What an id may not contain: whitespace of any kind (trec_eval and str.split() cut there, and a newline
# would forge a TREC line) and control characters. Ids are non-empty strings; integers are accepted as
# their decimal text (JSON sources often write them so), booleans, null and containers are not.
_BAD_ID_CHAR = re.compile(r"[\s\x00-\x1f\x7f]")


def shown(value: object, width: int = 40) -> str:
    """`repr(value)` cut to `width` characters for an error message; an integer too long for Python to
    print (over 4,300 digits) is described by its size instead of raising while the error is built."""
    if isinstance(value, int) and value.bit_length() > 4 * width:
        return f"an integer of {len(hex(value)) - 2} hex digits"
    return f"{value!r:.{width}}"


def id_problem(value: object) -> str | None:
    """Why `value` cannot be a query or document id (None when it can)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return f"id must be a string, got {type(value).__name__} {shown(value)}"
    if isinstance(value, int) and value.bit_length() > 160:
        return f"id must be a string, got {shown(value)}"
    text = str(value)
    if not text:
        return "id is empty"
    bad = _BAD_ID_CHAR.search(text)
    if bad:
        return f"id {text!r:.60} contains {bad.group(0)!r} (ids may not hold whitespace or control characters)"
    return None


def first_bad_id(ids: Iterable[str]) -> tuple[int, str] | None:
    """(position, reason) of the first unusable id; one regex pass over all ids when they are fine."""
    ids = ids if isinstance(ids, list) else list(ids)
    if set(map(type, ids)) <= {str} and all(ids) and not _BAD_ID_CHAR.search("".join(ids)):
        return None
    for n, value in enumerate(ids):
        reason = id_problem(value)
        if reason:
            return n, reason
    return None  # pragma: no cover - the fast check found a problem one of the ids must have


def score_problem(value: Any) -> str | None:
    """Why `value` cannot be a ranking score (None when it can): the one check behind run files, backends'
    answers, golden-set outputs and Python runs. A number or its text; never a boolean, null, NaN or infinity."""
    if isinstance(value, bool) or value is None:
        return f"score must be a number, got {value!r}"
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return f"score must be a number, got {shown(value)}"
    if not math.isfinite(number):
        return f"score must be finite, got {shown(value)}"
    return None


def served_scores(scores: Sequence[float | None]) -> list[float]:
    """Scores under which trec_eval's order (score descending) is the served order: the given scores when every
    hit has one and they never increase down the list, else the first of n hits scores n and the last 1. One rule
    for framework answers and imported traces, so both record the same run for the same answer."""
    if all(s is not None for s in scores):
        given = [float(s) for s in scores if s is not None]
        if all(a >= b for a, b in pairwise(given)):
            return given
    n = len(scores)
    return [float(n - r) for r in range(n)]


def answer_problem(ranking: Sequence[tuple[object, object]]) -> str | None:
    """Why a backend's ranking cannot be recorded as an answer: a bad doc id or a non-finite score."""
    try:  # fast path: string ids and finite float scores, checked with one regex and one array pass
        docs, scores = zip(*ranking, strict=True)
        if (
            all(type(d) is str and d for d in docs)
            and not _BAD_ID_CHAR.search("".join(docs))
            and np.isfinite(np.asarray(scores, dtype=np.float64)).all()
        ):
            return None
    except (TypeError, ValueError):
        pass
    for rank, item in enumerate(ranking, 1):
        try:
            doc, score = item
        except (TypeError, ValueError):
            return f"rank {rank}: expected (doc id, score), got {item!r:.60}"
        reason = id_problem(doc)
        if reason:
            return f"rank {rank}: {reason}"
        reason = score_problem(score)
        if reason:
            return f"rank {rank}: {reason}"
    return None


# Ids checked per block: the block's text (about 256 KB at 8 bytes an id) is made, checked and freed, so
# memory is reused from block to block instead of faulting in fresh pages for one text of every id.
IDS_PER_BLOCK = 32_768


def plain_rankings_fine(rankings: list[dict[Any, Any]], scores: np.ndarray | None = None) -> bool:
    """True when every doc id of these dicts is usable text and every score a finite number.

    Every pass is in C. The ids are joined with spaces one ranking at a time (a non-text id stops the
    join), so each id object is read once, while its ranking's ids are in cache, and a block of rankings'
    texts is then joined and checked as one. An empty id is one dict lookup per ranking (`"" in ranking`:
    a dict holds each key once); with none, an id may hold neither a space nor a control character
    exactly when the text is printable and holds n - 1 spaces, the separators. ASCII text is checked as
    bytes (every byte from 32 to 126), other text by `str.isprintable`. The scores are the array already
    read (None, text or a container there stops `np.fromiter`), checked finite. Anything doubtful returns
    False and the caller's slow walk names the entry. A bool score reads as 0 or 1 here, as NumPy reads it.
    """
    n = sum(map(len, rankings))
    step = max(1, IDS_PER_BLOCK * len(rankings) // max(n, 1))  # rankings per block, by their mean length
    for start in range(0, len(rankings), step):
        block = rankings[start : start + step]
        try:
            text = " ".join(filter(None, map(" ".join, block)))  # (an empty ranking adds no separator)
        except TypeError:
            return False
        if text and not _spaced_ids(text, sum(map(len, block))):
            return False  # a space or a control character, or Unicode isprintable refuses: the walk decides
    if any(map(dict.__contains__, rankings, repeat(""))):
        return False  # an empty id: the walk names it
    if scores is None:
        try:
            scores = np.fromiter(chain.from_iterable(map(dict.values, rankings)), dtype=np.float64, count=n)
        except (TypeError, ValueError, OverflowError):
            return False
    return bool(np.isfinite(scores).all())


def _spaced_ids(joined: str, n: int) -> bool:
    """Whether `joined`, n non-empty ids separated by single spaces, is printable with no other space."""
    if joined.isascii():  # as bytes: every byte from 32 to 126, and n - 1 spaces
        data = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
        return bool(data.min() >= 32 and data.max() <= 126 and np.count_nonzero(data == 32) == n - 1)
    return joined.count(" ") == n - 1 and joined.isprintable()


def rankings_problem(results: Mapping[Any, Any]) -> tuple[str, str] | None:
    """(field, reason) of the first thing in `{qid: {doc: score}}` (or `{qid: [(doc, score), ...]}`) that a run
    file could not hold -- an id that is not text, a score that is null, NaN or infinite -- or None.

    One pass over every id and score when all is well (a join and an array); the slow walk that names
    the entry (`run[query][doc]`) runs only when something is wrong.
    """
    bad = first_bad_id(list(results))
    if bad is not None:
        return "run", f"query {bad[1]}"
    rankings = list(results.values())
    if all(type(r) is dict for r in rankings) and plain_rankings_fine(rankings):
        return None
    for qid, ranking in results.items():
        if not isinstance(ranking, Mapping):
            if isinstance(ranking, (str, bytes)) or not isinstance(ranking, Sequence):
                kind = type(ranking).__name__
                return "run", f"the ranking of query {shown(qid)} must map doc id -> score, got {kind}"
            problem = answer_problem(list(ranking))
            if problem:
                return f"run[{shown(qid)}]", problem
            continue
        for doc, score in ranking.items():
            problem = id_problem(doc)
            if problem:
                return f"run[{shown(qid)}]", f"document {problem}"
            problem = score_problem(score)
            if problem:
                return f"run[{shown(qid)}][{shown(doc)}]", problem
    return None


# What a Python caller may pass as a score or grade: numbers as Python or NumPy hold them. A file's text is
# parsed ("0.5" in a run file is a number); a Python value is taken as given, so text and booleans are not.
_NUMBER_TYPES = (int, float, np.integer, np.floating)


def refuse_rankings_problems(results: Mapping[Any, Any]) -> None:
    """Hold `{qid: {doc: score}}` to a run file's rules: the first id that is not text or score that is null,
    NaN or infinite is an InputError naming `run[query][doc]` (the slow walk, run when a check failed)."""
    problem = rankings_problem(results)
    if problem is not None:
        from retbench.errors import InputError

        raise InputError(problem[1], field=problem[0])


def python_value_problem(value: object, what: str) -> str | None:
    """Why a Python value cannot be a `what` ("score" or "grade"): None when it is an int or a float (or
    a NumPy one); a bool, a string or None is refused (its finiteness and integrality are checked later,
    by the same rules as a file's)."""
    must = f"{what} must be {'an integer' if what == 'grade' else 'a number'}, got"
    if value is None:
        return f"{must} None"
    if isinstance(value, (bool, np.bool_)):
        return f"{must} {value!r} (a boolean)"
    if isinstance(value, (str, bytes)):
        return f"{must} {shown(value)} (text)"
    if not isinstance(value, _NUMBER_TYPES):
        return f"{must} {type(value).__name__} {shown(value)}"
    return None


def python_mapping_problem(results: Mapping[Any, Any], what: str) -> tuple[str, str] | None:
    """(field, reason) of the first id or value a Python `{qid: {doc: value}}` may not hold, or None.

    `what` is "score" (a run; a ranking may also be a list of (doc, value) pairs) or "grade" (qrels).
    Ids must be usable non-empty text (`id_problem`) and values numbers (`python_value_problem`): a doc id
    "" would otherwise be judged and scored as a document. When all is well this is a few C-speed passes
    (a type set, a join); the walk that names the entry runs only when something is wrong.
    """
    name = "run" if what == "score" else "qrels"
    bad = first_bad_id(list(results))
    if bad is not None:
        return name, f"query {bad[1]}"
    rankings = list(results.values())
    if all(type(r) is dict for r in rankings):
        types = set(map(type, chain.from_iterable(map(dict.values, rankings))))
        numbers = all(issubclass(t, _NUMBER_TYPES) and not issubclass(t, (bool, np.bool_)) for t in types)
        if numbers and first_bad_id(list(chain.from_iterable(rankings))) is None:
            return None
    for qid, ranking in results.items():
        where = f"{name}[{shown(qid)}]"
        if not isinstance(ranking, Mapping):
            if what != "score" or isinstance(ranking, (str, bytes)) or not isinstance(ranking, Sequence):
                return name, f"the entry of query {shown(qid)} must map doc id -> {what}, got {type(ranking).__name__}"
            problem = answer_problem(list(ranking))  # ids and pair shapes, as a backend's answer
            for rank, (_, value) in enumerate([] if problem else ranking, 1):
                value_problem = python_value_problem(value, what)
                if value_problem:
                    problem = f"rank {rank}: {value_problem}"
                    break
            if problem:
                return where, problem
            continue
        for doc, value in ranking.items():
            problem = id_problem(doc)
            if problem:
                return where, f"document {problem}"
            problem = python_value_problem(value, what)
            if problem:
                return f"{where}[{shown(doc)}]", problem
    return None
