"""The leaderboard as JSON rows, with each system's rank interval as the reports show it.

The leaderboard itself (ranks per dataset, means, order, rank resolution) is computed by
`retbench.leaderboard.build_leaderboard`; terminal, Markdown and HTML render that object only.
"""

from __future__ import annotations

from typing import Any

from retbench.leaderboard import Leaderboard
from retbench.report.resolution import interval_cell


def leaderboard_dict(board: Leaderboard) -> dict[str, Any]:
    """The leaderboard as JSON: per system its scores, mean, average rank and rank interval; the tied-first group."""
    return {
        "metric": board.metric,
        "datasets": board.datasets,
        "rows": [
            {
                "system": s,
                "scores": dict(zip(board.datasets, sc, strict=True)),
                "mean": m,
                "average_rank": r,
                "rank_interval": interval_cell(board.resolution, s),
            }
            for s, sc, m, r in board.rows()
        ],
        "tied_first": board.resolution.tied_first if board.resolution is not None else None,
    }
