"""How load is applied: the `stress:` block of a stress config, declared in `retbench.config.experiment`."""

from __future__ import annotations

from retbench.config.experiment import MAX_CONCURRENCY, LoadSettings

__all__ = ["MAX_CONCURRENCY", "LoadSettings"]
