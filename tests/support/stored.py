"""What a results folder holds, read through the one reader (`retbench.results.read_results`) into the plain
shape assertions are written against: system -> {metric: value, block: block, study figure: value}.

For tests only, where no metric shares a name with a block: the results themselves keep values and blocks
apart (`SystemResult.metrics` beside `.coverage`, `.latency`, ...), which tests/unit/results checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retbench.results import read_results
from retbench.results.model import BLOCKS


def flat(out: Path) -> dict[str, dict[str, Any]]:
    """system -> its values (NaN as None) beside its non-empty blocks and study-specific figures."""
    rows: dict[str, dict[str, Any]] = {}
    for system in read_results(out):
        row: dict[str, Any] = {m: (None if v.value != v.value else v.value) for m, v in system.metrics.items()}
        for name in BLOCKS:
            block = getattr(system, name)
            if name == "first_stage" and block:
                block = {m: v.value for m, v in block.items()}
            if name == "extra" and block:
                row.update(block)
            elif block:
                row[name] = block
        rows[system.name] = row
    return rows
