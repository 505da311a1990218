"""The seeded stream and its exact answers: what the store should hold after each write batch, and what it should return.

A plan is drawn once from the seed and the corpus (no store involved), so a re-run makes the same stream:

- `order` (`random`: a seeded permutation, or `corpus` order); the first `initial_fraction` of it is indexed
  before the stream starts, the rest is inserted `batch_size` documents per batch;
- `update_fraction` of the initial documents are re-written once (the text cut to its second half of words,
  a revised, shorter version; new metadata `rev: 1` and a re-drawn `bucket`), and `delete_fraction` of them
  are deleted, each spread evenly over the batches (a document is updated or deleted, never both);
- every document carries `bucket`, a seeded integer in [0, 1000); the filter of selectivity s is
  `bucket < round(1000 s)` (at least 1), so 50%, 10%, 1% and 0.1% are `lt` 500, 100, 10 and 1;
- checkpoints sit after evenly spaced batches (checkpoint 0 is before the first batch).

`State` gives the visible set after any number of writes (three per batch) and answers the exact question: the top k by inner product of the
query vector with each visible document's current vector (the store's cosine for normalized vectors),
restricted to the filter, ties broken by document id descending (trec_eval's order). Recall@k of a
response is |response ∩ exact| / |exact| over its first k documents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from retbench.config.streaming import StreamSettings
from retbench.jsontypes import JSONObject

BUCKETS = 1000


def bucket_limit(selectivity: float) -> int:
    """The `bucket < limit` bound that selects `selectivity` of the documents (at least one bucket)."""
    return max(1, round(BUCKETS * selectivity))


def filter_of(selectivity: float | None) -> JSONObject | None:
    """The query filter (`metadata.filter` language) for a selectivity; None for unfiltered."""
    return None if selectivity is None else {"bucket": {"lt": bucket_limit(selectivity)}}


@dataclass
class Batch:
    """One batch, three writes in this order: the inserts (one `add()`), the updates (one `add()`), the deletes (one `delete()`)."""

    inserts: np.ndarray
    updates: np.ndarray
    deletes: np.ndarray

    def size(self) -> int:
        return len(self.inserts) + len(self.updates) + len(self.deletes)


@dataclass
class Plan:
    """The whole stream, by document index into the corpus."""

    initial: np.ndarray
    batches: list[Batch]
    checkpoints: list[int]  # batch counts after which a checkpoint runs (0: before the stream)
    bucket: np.ndarray  # (n, 2): the bucket of version 0 and of the updated version
    update_text: dict[int, str] = field(default_factory=dict)

    def metadata(self, i: int, version: int) -> JSONObject:
        return {"bucket": int(self.bucket[i, version]), "rev": version}

    def counts(self) -> dict[str, int]:
        """initial, batches, inserts, updates, deletes (the checkpoints are `checkpoints`)."""
        return {
            "initial": len(self.initial),
            "batches": len(self.batches),
            "inserts": sum(len(b.inserts) for b in self.batches),
            "updates": sum(len(b.updates) for b in self.batches),
            "deletes": sum(len(b.deletes) for b in self.batches),
        }


def _spread(items: np.ndarray, batches: int) -> list[np.ndarray]:
    """Items split into `batches` contiguous, near-equal parts (the evenly spread schedule)."""
    return [np.asarray(p, dtype=np.int64) for p in np.array_split(items, batches)] if batches else []


def make_plan(texts: Sequence[str], settings: StreamSettings) -> Plan:
    """The seeded stream over a corpus of these (joined) texts."""
    n = len(texts)
    rng = np.random.default_rng(settings.seed)
    order = rng.permutation(n) if settings.order == "random" else np.arange(n)
    n_init = max(1, round(n * settings.initial_fraction))
    initial, rest = order[:n_init], order[n_init:]
    n_batches = max(1, math.ceil(len(rest) / settings.batch_size))
    inserts = [rest[i * settings.batch_size : (i + 1) * settings.batch_size] for i in range(n_batches)]
    # only documents whose shortened text differs can be updated (a one-word text has no first half)
    updatable = np.array([i for i in initial if len(texts[i].split()) >= 4], dtype=np.int64)
    chosen = rng.permutation(updatable)
    n_upd = min(len(chosen), round(n_init * settings.update_fraction))
    n_del = min(len(chosen) - n_upd, round(n_init * settings.delete_fraction))
    updates, deletes = np.sort(chosen[:n_upd]), np.sort(chosen[n_upd : n_upd + n_del])
    upd_parts, del_parts = _spread(rng.permutation(updates), n_batches), _spread(rng.permutation(deletes), n_batches)
    batches = [
        Batch(np.asarray(ins, dtype=np.int64), u, d) for ins, u, d in zip(inserts, upd_parts, del_parts, strict=True)
    ]
    bucket = rng.integers(0, BUCKETS, size=(n, 2))
    cps = sorted({0} | {round(n_batches * (c + 1) / settings.checkpoints) for c in range(settings.checkpoints)})
    update_text = {int(i): _shorten(texts[i]) for i in updates}
    return Plan(initial, batches, cps, bucket, update_text)


def _shorten(text: str) -> str:
    words = text.split()
    return " ".join(words[len(words) // 2 :])


NEVER = np.iinfo(np.int64).max


#: writes per batch: its inserts, then its updates, then its deletes, each acknowledged on its own; a state
#: is the number of writes acknowledged (batch b complete = STEPS * b), so a query that lands between two
#: writes of one batch still has an exact state to be held to
STEPS = 3


class State:
    """Which documents are visible, in which version, after the first `s` writes (`STEPS` per batch).

    Each document's events are write counts (`inserted_at` 0 for the initial documents, `updated_at` and
    `deleted_at` NEVER when they do not happen), so any state is a few array comparisons, in any order.
    """

    def __init__(self, plan: Plan, n: int) -> None:
        self.plan = plan
        self.inserted_at = np.full(n, NEVER, dtype=np.int64)
        self.updated_at = np.full(n, NEVER, dtype=np.int64)
        self.deleted_at = np.full(n, NEVER, dtype=np.int64)
        self.inserted_at[plan.initial] = 0
        for b, batch in enumerate(plan.batches):
            self.inserted_at[batch.inserts] = STEPS * b + 1
            self.updated_at[batch.updates] = STEPS * b + 2
            self.deleted_at[batch.deletes] = STEPS * b + 3
        self.rows = np.arange(n)

    def alive(self, b: int) -> np.ndarray:
        return (self.inserted_at <= b) & (self.deleted_at > b)

    def version(self, b: int) -> np.ndarray:
        return (self.updated_at <= b).astype(np.int64)

    def mask(self, b: int, selectivity: float | None) -> np.ndarray:
        """Documents visible after b writes that pass the filter (in their version at that point)."""
        alive = self.alive(b)
        if selectivity is None:
            return alive
        return alive & (self.plan.bucket[self.rows, self.version(b)] < bucket_limit(selectivity))

    def scores(self, b: int, q: np.ndarray, vectors: np.ndarray, updated: np.ndarray) -> np.ndarray:
        """Each document's score for query vector q in its version after b writes (`updated`: the new vectors)."""
        s = vectors @ q
        cur = np.flatnonzero(self.updated_at <= b)
        if len(cur):
            s[cur] = updated[cur] @ q
        return s

    def exact(self, b: int, scores: np.ndarray, selectivity: float | None, k: int, ids: np.ndarray) -> list[int]:
        """Document indexes of the exact top k among the visible, filtered documents after b writes.

        Ties go to the larger document id, as trec_eval orders them.
        """
        cand = np.flatnonzero(self.mask(b, selectivity))
        if not len(cand):
            return []
        # a stable partial sort first, then the exact trec_eval order (score descending, id descending) on the head
        head = cand[np.argsort(-scores[cand], kind="stable")[: min(len(cand), 4 * k + 16)]]
        keyed = sorted(head, key=lambda i: (-scores[i], _Desc(str(ids[i]))))
        return [int(i) for i in keyed[:k]]


class _Desc:
    """Reverses string order inside a sort key (document id descending)."""

    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def __lt__(self, other: _Desc) -> bool:
        return self.s > other.s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.s == other.s

    def __hash__(self) -> int:
        return hash(self.s)


def recall(returned: Sequence[str], exact: Sequence[str], k: int) -> float | None:
    """|first k returned ∩ exact| / |exact| (None when the exact answer is empty: nothing to find)."""
    if not exact:
        return None
    return len(set(returned[:k]) & set(exact)) / len(exact)
