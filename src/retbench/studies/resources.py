"""Resource figures for manifests: peak memory per stage, bytes on disk, throughput, device.

Peak RSS per stage is the kernel's high-water mark of the process's resident set (`VmHWM` in
`/proc/self/status`), reset at the start of each stage by writing 5 to `/proc/self/clear_refs`
(Linux 4.0+), so a stage's figure is its own peak, not the largest of every stage before it.
Where that reset is refused (another OS, a locked-down container) the figure is the process's
peak so far (`resource.getrusage`), and `peak_rss_scope` says so. Work done in other processes
(Ray workers) is reported by those processes and recorded separately.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _clear_peak() -> bool:
    """Reset this process's peak-RSS mark; False where the OS does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_rss_mib() -> float:
    """Peak resident set of this process in MiB (since the last reset, where resets work)."""
    kib = _status_kib("VmHWM")
    if kib is None:
        raw = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        kib = raw // 1024 if sys.platform == "darwin" else raw  # bytes on macOS, KiB on Linux
    return round(kib / 1024, 1)


@contextmanager
def stage(figures: dict[str, object], name: str) -> Iterator[None]:
    """Record `<name>_seconds`, `<name>_peak_rss_mib` (and the scope of that peak) into `figures`."""
    scoped = _clear_peak()
    t0 = time.perf_counter()
    try:
        yield
    finally:
        figures[f"{name}_seconds"] = round(time.perf_counter() - t0, 3)
        figures[f"{name}_peak_rss_mib"] = peak_rss_mib()
        figures["peak_rss_scope"] = "stage" if scoped else "process"


def size_on_disk(path: str | Path) -> int:
    """Bytes of a file or of every file under a folder (0 when absent)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    if not p.is_dir():
        return 0
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def rate(count: int, seconds: float) -> float | None:
    """Items per second, or None when nothing was timed."""
    return round(count / seconds, 2) if count and seconds > 0 else None


def cpu_seconds() -> float:
    """CPU time (user + system, all threads) this process has used since it started."""
    t = os.times()
    return round(t.user + t.system, 3)


def worker_figures() -> dict[str, object]:
    """What a worker process reports about itself: pid, host, peak RSS, CPU seconds so far, niceness."""
    return {
        "pid": os.getpid(),
        "host": os.uname().nodename,
        "peak_rss_mib": peak_rss_mib(),
        "cpu_seconds": cpu_seconds(),
        "nice": os.nice(0) if hasattr(os, "nice") else None,
    }
