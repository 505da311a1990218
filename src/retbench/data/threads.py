"""Threads for the NumPy and Arrow work that releases the GIL: parsing a run file's parts, keying its ids,
the blocked hash passes over 10M ranked ids.

The pool is made per call and joined before the call returns, so no thread outlives the work (a thread
left in a library's pool at interpreter exit is how Arrow aborted processes: see `io.trec`). `RETBENCH_THREADS`
caps the count (1 turns threading off), for a process that already runs one job per core.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def cpus() -> int:
    """CPUs this process may use (its affinity mask on Linux), capped by RETBENCH_THREADS when set."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    cap = os.environ.get("RETBENCH_THREADS", "").strip()
    if cap.isdigit() and int(cap) >= 1:
        n = min(n, int(cap))
    return max(1, n)


def thread_map(fn: Callable[[T], R], items: Iterable[T], *, parallel: bool = True) -> list[R]:
    """`[fn(x) for x in items]`, on one thread per CPU when `parallel` and there is more than one item;
    results in the items' order, the first exception raised as it would be by the loop."""
    work = list(items)
    n = min(cpus(), len(work)) if parallel else 1
    if n <= 1:
        return [fn(x) for x in work]
    from concurrent.futures import ThreadPoolExecutor  # deferred: a small input never needs it (CLI start-up)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(fn, work))
