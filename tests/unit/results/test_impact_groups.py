"""Ingestion impact by candidate group: the means the report's "By group" table shows, computed in results/."""

from __future__ import annotations

import math

import pytest

from retbench.report.impact import _by_group
from retbench.results.impact import Impact, Novelty, impact_by_group


def _alone() -> list[Impact]:
    near = Novelty(0.2, 0.3, 0.8, None, None)
    return [
        Impact("a", "alone", group="gold", deltas={"recall@5": 0.1}, gain=0.3, novelty=near, changed=["q1"]),
        Impact("b", "alone", group="gold", deltas={"recall@5": 0.0}, gain=0.1),
        Impact("c", "alone", group="noise", deltas={"recall@5": -0.05}, gain=-0.2),
    ]


def test_each_group_averages_its_own_candidates_in_the_order_groups_first_appear() -> None:
    gold, noise = impact_by_group(_alone(), ["recall@5"])
    assert (gold.group, gold.n, gold.changed) == ("gold", 2, 1)
    assert gold.mean_gain == pytest.approx(0.2) and gold.mean_deltas == {"recall@5": pytest.approx(0.05)}
    assert gold.mean_novelty_min == pytest.approx(0.2)  # over the candidates that have a novelty
    assert noise.n == 1 and math.isnan(noise.mean_novelty_min)  # none has one: no value, not 0


def test_the_by_group_table_renders_those_means_and_says_n_a_for_a_missing_one() -> None:
    table = "\n".join(_by_group(_alone(), ["recall@5"]))
    assert "| gold | 2 | 0.2000 | 0.200 | +0.05000 | 1 |" in table
    assert "| noise | 1 | -0.2000 | n/a | -0.05000 | 0 |" in table
