"""Reading `{qid: {doc: score}}` (or `{qid: [(doc, score), ...]}`) into a Run's columns, checked.

Kept apart from the Run itself: this is where a Python caller's input is held to a run file's rules
(`ids.rankings_problem`), and where the common case, dicts of string ids, is read with no per-document
Python work (see `benchmarks/profile_speed.py floors` for what that costs against the least any check
must do).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from retbench.data.ids import first_bad_id, plain_rankings_fine, refuse_rankings_problems
from retbench.data.lazy_ids import str_keyed_mappings


class RankingColumns(NamedTuple):
    """A checked input's columns: `maps` when the caller's `{doc: score}` mappings are kept (ids read from
    them on demand, never repeated within one), else `doc_ids` copied out in input order."""

    query_ids: list[str]
    offsets: np.ndarray
    scores: np.ndarray
    maps: list[Mapping[str, float]] | None
    doc_ids: np.ndarray | None


def read_rankings(results: Mapping[str, Mapping[str, float] | Sequence[tuple[str, float]]]) -> RankingColumns:
    """The columns of `results`, or an InputError naming `run[query][doc]` for an id that is not text or a
    null, NaN or infinite score. Query and doc ids become strings; order is left to the Run.

    Mappings whose ids are strings (checked on each ranking's first id, then every id in one C pass) are
    not copied: the Run keeps them, so they must not be modified while it is in use.
    """
    qids = list(results)
    if first_bad_id(qids) is not None:
        refuse_rankings_problems(results)  # names the query
    if not set(map(type, qids)) <= {str}:
        qids = [str(q) for q in qids]
    rankings = list(results.values())
    plain = set(map(type, rankings)) <= {dict}
    if str_keyed_mappings(rankings, plain):
        # the common case, {qid: {doc: score}}: columns straight from the mappings, no per-doc Python work
        lengths = np.fromiter(map(len, rankings), dtype=np.int64, count=len(rankings))
        n = int(lengths.sum())

        def values() -> Iterable[Any]:
            return map(dict.values, rankings) if plain else (r.values() for r in rankings)  # type: ignore[arg-type, union-attr]

        try:
            scores: np.ndarray | None = np.fromiter(chain.from_iterable(values()), dtype=np.float64, count=n)
        except (TypeError, ValueError, OverflowError):
            scores = None
        # one C-speed check of every id and score (the scores just read are reused); the slow walk that
        # names the bad entry runs only when it fails, or for mapping types it cannot vouch for
        if scores is None or not plain or not plain_rankings_fine(rankings, scores):  # type: ignore[arg-type]
            refuse_rankings_problems(results)
            if scores is None:
                scores = np.fromiter(chain.from_iterable(values()), dtype=np.float64, count=n)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return RankingColumns(qids, offsets, scores, rankings, None)  # type: ignore[arg-type]
    refuse_rankings_problems(results)
    docs: list[str] = []
    score_list: list[float] = []
    offsets_list = [0]
    for ranking in rankings:
        items = ranking.items() if isinstance(ranking, Mapping) else ranking
        for d, sc in items:
            docs.append(str(d))
            score_list.append(float(sc))
        offsets_list.append(len(docs))
    doc_arr = np.empty(len(docs), dtype=object)
    doc_arr[:] = docs
    return RankingColumns(
        qids,
        np.asarray(offsets_list, dtype=np.int64),
        np.asarray(score_list, dtype=np.float64),
        None,
        doc_arr,
    )
