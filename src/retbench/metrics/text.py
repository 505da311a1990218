"""Metrics that look at what was retrieved, not only at grades: answer containment and support groups.

These need the ranked doc ids (and, for containment, their texts), so they take a `MetricContext`
rather than a bare GainMatrix. Golden sets are small (hundreds to thousands of samples), so a
per-query pass here is cheap; the deep-ranking metrics stay in `ranking.py`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from retbench.errors import InputError

if TYPE_CHECKING:
    from retbench.metrics.base import MetricContext

_SPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Case-folded, whitespace collapsed to single spaces, stripped: how containment compares texts."""
    return _SPACE.sub(" ", text).strip().casefold()


def contains_answer(answer: str, texts: Sequence[str]) -> bool:
    """True if the normalized answer occurs inside any of the normalized texts."""
    needle = normalize_text(answer)
    if not needle:
        return False
    return any(needle in normalize_text(t) for t in texts)


def _text_of(texts: Any, doc_id: str) -> str | None:
    if texts is None:
        return None
    if isinstance(texts, Mapping):
        return texts.get(doc_id)
    if hasattr(texts, "index") and hasattr(texts, "texts"):  # a Corpus: match on the indexed text
        i = texts.index.get(doc_id)
        return texts.joined(i) if i is not None else None
    raise TypeError("texts must be a mapping doc id -> text or a Corpus")


def containment(ctx: MetricContext, k: np.ndarray | None) -> np.ndarray:
    """1.0 if the sample's expected answer occurs in the text of a top-k document.

    Needs `sample.answer` for every counted query and the texts of ranked documents (a Corpus, a
    mapping, or system outputs' `text`); a ranked doc with no known text cannot contain anything.
    """
    out = np.zeros(len(ctx.gm), dtype=np.float64)
    for i, sample in enumerate(ctx.samples):
        if sample is not None and getattr(sample, "answerable", None) is False:
            out[i] = np.nan  # an unanswerable question has no answer to contain
            continue
        if sample is None or not sample.answer:
            qid = ctx.gm.query_ids[i]
            raise InputError(f"answer containment needs an expected answer for query {qid!r}", field="answer")
        docs = ctx.ranked(i, None if k is None else int(k[i]))
        found = [t for t in (_text_of(ctx.texts, d) for d in docs) if t is not None]
        out[i] = float(contains_answer(sample.answer, found))
    return out


def support_groups(ctx: MetricContext, i: int, level: int) -> list[set[str]]:
    """The groups of ids query i needs: the sample's `support_groups`, else one group per relevant doc."""
    sample = ctx.samples[i] if ctx.samples else None
    if sample is not None and sample.support_groups:
        return [set(g) for g in sample.support_groups if g]
    qrels = ctx.qrels.get(ctx.gm.query_ids[i], {}) if ctx.qrels is not None else {}
    return [{d} for d, g in qrels.items() if g >= level]


def recall_groups(ctx: MetricContext, k: np.ndarray | None, level: int, require_all: bool) -> np.ndarray:
    """recall_all@k: every support group has an id in the top k; recall_any@k: some support id is."""
    out = np.zeros(len(ctx.gm), dtype=np.float64)
    for i in range(len(ctx.gm)):
        groups = support_groups(ctx, i, level)
        if not groups:
            continue
        top = set(ctx.ranked(i, None if k is None else int(k[i])))
        hits = [bool(g & top) for g in groups]
        out[i] = float(all(hits) if require_all else any(hits))
    return out
