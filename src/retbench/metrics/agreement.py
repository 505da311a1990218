"""Agreement of a system's rankings with a reference system's: how much of exact search an ANN index keeps.

overlap@k(q) = |top-k(system, q) ∩ top-k(reference, q)| / |top-k(reference, q)|, averaged over the queries
whose reference ranking is not empty (a query the system failed counts 0). With an exact search as the
reference (FAISS flat on the same vectors) this is the recall of the approximate index against exact
search, the figure ANN benchmarks report (ann-benchmarks, VectorDBBench). Queries that carry a metadata
filter are also averaged on their own: filtered recall against the exact filtered search.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from retbench.data import Run
from retbench.jsontypes import JSONObject


def overlap_at_k(run: Run, reference: Run, qids: Sequence[str], k: int) -> tuple[float | None, int]:
    """(mean overlap@k, queries averaged); None when no query has a non-empty reference ranking."""
    vals = []
    for q in qids:
        want = reference.docs(q)[:k] if q in reference else []
        if not want:
            continue
        got = run.docs(q)[:k] if q in run else []
        vals.append(len(set(got) & set(want)) / len(want))
    return (float(np.mean(vals)) if vals else None), len(vals)


def reference_agreement(
    run: Run, reference: Run, qids: Sequence[str], k: int, *, reference_name: str, filtered: Collection[str] = ()
) -> JSONObject:
    """The `reference` block of metrics.json: overlap@k over all queries and over the filtered ones."""
    overall, n = overlap_at_k(run, reference, qids, k)
    block: JSONObject = {"system": reference_name, "k": k, "overlap": overall, "queries": n}
    if filtered:
        fq = [q for q in qids if q in filtered]
        block["filtered_overlap"], block["filtered_queries"] = overlap_at_k(run, reference, fq, k)
    return block
