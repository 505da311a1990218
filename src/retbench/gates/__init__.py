"""Ship criteria applied to a candidate against a baseline: `apply` (the numbers and the verdict of each gate)
and `flow` (the whole flow the CLI and the Python API share: baselines from the history, same-data and
same-settings checks, the verdict recorded)."""

from retbench.gates.apply import Check, GateReport, GateResult, TagRow, run_gates
from retbench.gates.flow import GateRun, gate

__all__ = ["Check", "GateReport", "GateResult", "GateRun", "TagRow", "gate", "run_gates"]
