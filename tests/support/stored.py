"""What a results folder holds, read through the one reader (`retbench.results.read_results`) into the plain
shape assertions are written against: system -> {metric: value, block: block, study figure: value}.

For tests only, where no metric shares a name with a block: the results themselves keep values and blocks
apart (`SystemResult.metrics` beside `.coverage`, `.latency`, ...), which tests/unit/results checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retbench.results import SystemResult, read_results
from retbench.results.model import BLOCKS


def flat(out: Path) -> dict[str, dict[str, Any]]:
    """system -> its values (NaN as None) beside its non-empty blocks and study-specific figures."""
    return {system.name: flat_system(system) for system in read_results(out)}


def flat_system(system: SystemResult) -> dict[str, Any]:
    """One system's values (NaN as None) beside its non-empty blocks and study-specific figures."""
    row: dict[str, Any] = {m: (None if v.value != v.value else v.value) for m, v in system.metrics.items()}
    for name in BLOCKS:
        block = getattr(system, name)
        if name == "first_stage" and block:
            block = {m: v.value for m, v in block.items()}
        if name == "extra" and block:
            row.update(block)
        elif block:
            row[name] = block
    return row
