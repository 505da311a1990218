"""What golden-set samples say beyond their text: judgements, per-sample cutoffs and breakdown groups."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retbench.data.corpus import Sample
from retbench.data.qrels import Qrels
from retbench.errors import InputError


def sample_map(samples: Mapping[str, Sample] | Sequence[Sample] | None) -> dict[str, Sample]:
    """Samples by id, from a mapping or a sequence (None: none)."""
    if samples is None:
        return {}
    if isinstance(samples, Mapping):
        return dict(samples)
    return {s.id: s for s in samples}


def sample_k(sample: Sample | None) -> int | None:
    """A sample's own cutoff: `Sample.k`, else `metadata.k`."""
    if sample is None:
        return None
    k = sample.k if sample.k is not None else sample.metadata.get("k")
    if k is None:
        return None
    if not isinstance(k, (int, float)) or int(k) != k or int(k) < 1:
        raise InputError(f"sample {sample.id!r}: k must be a positive integer, got {k!r}", field="metadata.k")
    return int(k)


def qrels_from_samples(samples: Mapping[str, Sample] | Sequence[Sample]) -> Qrels:
    """Judgements from golden-set samples (`expected`: doc id -> gain), in sample order."""
    return Qrels({s.id: dict(s.expected) for s in sample_map(samples).values()})


def groups_from_samples(samples: Mapping[str, Sample] | Sequence[Sample]) -> dict[str, list[str]]:
    """Query ids by tag, by category (`category:<name>`) and, when some sample is marked
    `answerable: false`, into `answerable` and `unanswerable`, for `Evaluation.breakdown`."""
    groups: dict[str, list[str]] = {}
    smap = sample_map(samples)
    split = any(s.answerable is False for s in smap.values())
    for s in smap.values():
        for tag in s.tags:
            groups.setdefault(tag, []).append(s.id)
        if s.category:
            groups.setdefault(f"category:{s.category}", []).append(s.id)
        if split:
            groups.setdefault("unanswerable" if s.answerable is False else "answerable", []).append(s.id)
    return {g: list(dict.fromkeys(qids)) for g, qids in groups.items()}  # a tag named like a split: once
