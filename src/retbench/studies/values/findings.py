"""What the values show: value summed by group, near-duplicate groups, and queries that leak into the corpus.

Rules (each stated where a report prints its counts):
- near-duplicates: documents whose normalized embeddings have cosine >= threshold are linked, and linked
  documents form one group (connected components); novelty = 1 - the best cosine to another document, as in
  ingestion impact. All pairs are compared, in blocks: O(N^2 d) time, O(block x N) memory.
- leaks: a query leaks when its text, case-folded with runs of whitespace made one space, occurs inside a
  document's indexed text (title + text), or when a document's embedding has cosine >= threshold with the query's;
  a query whose folded text equals another query's of the same query file (another split, another id) is an
  overlap between evaluation and the queries a system may have been tuned on.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from retbench.results.values import GroupValue

_SPACE = re.compile(r"\s+")


def fold(text: str) -> str:
    """Case-folded text with every run of whitespace one space (what the leak rule compares)."""
    return _SPACE.sub(" ", text).strip().casefold()


def group_sums(keys: Sequence[str], values: np.ndarray) -> list[GroupValue]:
    """Per group: documents, summed and mean value, how many are harmful (negative); largest sum first."""
    out: dict[str, list[float]] = defaultdict(list)
    for key, v in zip(keys, values, strict=True):
        out[key].append(float(v))
    rows = [GroupValue(g, len(v), sum(v), sum(v) / len(v), sum(x < 0 for x in v)) for g, v in out.items()]
    return sorted(rows, key=lambda r: (-r.value, r.group))


def group_key(doc_id: str, metadata: Mapping[str, object] | None, field: str) -> str:
    """A document's group under `field`: a metadata value, or for `folder` its id up to the last '/'."""
    if field == "folder":
        return doc_id.rpartition("/")[0] or "(top level)"
    value = (metadata or {}).get(field)
    return "(none)" if value is None else str(value)


def near_duplicate_groups(
    vectors: np.ndarray, threshold: float, block: int = 1024
) -> tuple[list[list[int]], np.ndarray]:
    """Groups (2 documents or more, by index) linked by cosine >= threshold, and each document's novelty."""
    n = len(vectors)
    parent = np.arange(n)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    best = np.full(n, -1.0)
    for b0 in range(0, n, block):
        sims = vectors[b0 : b0 + block] @ vectors.T
        rows = np.arange(len(sims))
        sims[rows, b0 + rows] = -np.inf  # not itself
        best[b0 : b0 + len(sims)] = sims.max(axis=1) if n > 1 else -1.0
        for i, j in zip(*np.nonzero(sims >= threshold), strict=True):
            a, b = find(b0 + int(i)), find(int(j))
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        members[find(i)].append(i)
    groups = sorted((m for m in members.values() if len(m) > 1), key=lambda m: (-len(m), m[0]))
    return groups, 1.0 - best


def text_leaks(query_texts: Sequence[str], doc_texts: Sequence[str]) -> list[list[int]]:
    """Per query, the documents whose folded text contains the query's folded text."""
    folded = [fold(t) for t in doc_texts]
    starts, pos = [], 0
    for t in folded:
        starts.append(pos)
        pos += len(t) + 1
    haystack = "\0".join(folded)
    out = []
    for q in query_texts:
        needle, found, at = fold(q), [], 0
        while needle:
            at = haystack.find(needle, at)
            if at < 0:
                break
            d = bisect.bisect_right(starts, at) - 1
            found.append(d)
            at = starts[d + 1] if d + 1 < len(starts) else len(haystack)
        out.append(found)
    return out


def embedding_leaks(queries: np.ndarray, documents: np.ndarray, threshold: float, block: int = 256) -> list[list[int]]:
    """Per query, the documents whose cosine with it (normalized vectors) reaches the threshold."""
    out: list[list[int]] = []
    for b0 in range(0, len(queries), block):
        sims = queries[b0 : b0 + block] @ documents.T
        out.extend(np.flatnonzero(row >= threshold).tolist() for row in sims)
    return out


def query_overlaps(eval_ids: Sequence[str], texts: Mapping[str, str]) -> dict[str, list[str]]:
    """Evaluation queries whose folded text equals another query's of the same file (by id)."""
    by_text: dict[str, list[str]] = defaultdict(list)
    for qid, text in texts.items():
        by_text[fold(text)].append(qid)
    out = {}
    for qid in eval_ids:
        others = [o for o in by_text[fold(texts[qid])] if o != qid]
        if others:
            out[qid] = others
    return out
