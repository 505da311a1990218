"""Per-query tables on disk: a TSV of query id, status and one column per metric, after '#' header lines.

Each header line is `# key: <JSON>` (the settings the table was counted with), so a table read back carries
what reading it honestly needs. Values are written with Python's shortest exact repr, so reading gives back
identical floats. `evaluation.Evaluation.to_tsv` / `from_tsv` are the users; this module knows no metric.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retbench.errors import InputError
from retbench.io.files import atomic_text

MAGIC = "# retbench per-query evaluation\n"


def write_table(
    path: str | Path,
    header: Mapping[str, object],
    metrics: Sequence[str],
    query_ids: Sequence[str],
    status: Sequence[str],
    values: np.ndarray,
) -> None:
    """The table at `path`: the header's JSON lines, then query_id, status and the metrics' columns.

    Written through the one atomic writer: a full disk leaves the previous table and names `path`."""
    with atomic_text(Path(path)) as fh:
        fh.write(MAGIC)
        for key, value in header.items():
            fh.write(f"# {key}: {json.dumps(value)}\n")
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(["query_id", "status", *metrics])
        for q, s, row in zip(query_ids, status, np.asarray(values).tolist(), strict=True):
            w.writerow([q, s, *(repr(v) for v in row)])


def read_table(
    path: str | Path, header_keys: Collection[str], statuses: Collection[str]
) -> tuple[dict[str, Any], list[str], list[str], list[str], np.ndarray]:
    """(header values, metrics, query ids, statuses, values [queries x metrics]); bad lines name file:line."""
    p = Path(path)
    meta: dict[str, Any] = {}
    rows: list[list[str]] = []
    header: list[str] | None = None
    with open(p, encoding="utf-8", newline="") as fh:
        for lineno, line in enumerate(fh, start=1):
            line = line.rstrip("\n")
            if line.startswith("#"):
                key, sep, value = line[1:].strip().partition(": ")
                if sep and key in header_keys:
                    try:
                        meta[key] = json.loads(value)
                    except json.JSONDecodeError:
                        raise InputError(f"bad header value for {key!r}", path=p, line=lineno) from None
                continue
            if not line:
                continue
            parts = line.split("\t")
            if header is None:
                if parts[:2] != ["query_id", "status"]:
                    raise InputError("expected a header row starting 'query_id<TAB>status'", path=p, line=lineno)
                header = parts
                continue
            if len(parts) != len(header):
                raise InputError(f"expected {len(header)} columns, got {len(parts)}", path=p, line=lineno)
            if parts[1] not in statuses:
                raise InputError(f"unknown status {parts[1]!r}", path=p, line=lineno, field="status")
            try:
                [float(v) for v in parts[2:]]
            except ValueError:
                raise InputError("metric values must be numbers", path=p, line=lineno) from None
            rows.append(parts)
    if header is None:
        raise InputError("no header row", path=p)
    metrics = header[2:]
    values = np.array([[float(v) for v in r[2:]] for r in rows], dtype=np.float64).reshape(len(rows), len(metrics))
    return meta, metrics, [r[0] for r in rows], [r[1] for r in rows], values


__all__ = ["read_table", "write_table"]
