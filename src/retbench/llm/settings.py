"""The `judge:` config block, declared with the other config models in `retbench.config.judge`.

Kept as the name the LLM modules import (`from retbench.llm.settings import JudgeSettings`).
"""

from __future__ import annotations

from retbench.config.judge import JudgeSettings, LocalServer

__all__ = ["JudgeSettings", "LocalServer"]
