"""How load is applied: the `stress:` block of a stress config, declared in `retbench.config.experiment`."""

from __future__ import annotations

from retbench.config.experiment import LoadSettings

__all__ = ["LoadSettings"]
