"""A prediction-powered estimate stays inside its metric's range and says when its interval was clipped."""

from __future__ import annotations

import numpy as np

from retbench.estimates import label_estimates, source_label
from retbench.evaluation import Evaluation


def table(name: str, qids: list[str], values: list[float]) -> Evaluation:
    return Evaluation(name, ["hit@5"], qids, np.array(values, dtype=float)[:, None], ["ok"] * len(qids))


def test_a_yes_no_share_estimated_by_ppi_is_clipped_to_0_1_and_says_so():
    doubly = [f"h{i}" for i in range(4)]
    rest = [f"u{i}" for i in range(20)]
    human = table("human", doubly, [1, 0, 1, 0])
    # the judge disagrees with people on every doubly labelled query and says yes on every other one
    llm = table("llm", doubly + rest, [0, 1, 0, 1] + [1] * 20)
    est = label_estimates(llm, llm, human, doubly)["hit@5"]
    assert est["source"] == "ppi"
    assert 0.0 <= est["ci_low"] <= est["mean"] <= est["ci_high"] == 1.0  # unclipped, the top end passes 1
    assert est["clipped"] == "[0, 1]"
    assert "[" in source_label(est, value=True) and "(clipped to [0, 1])" in source_label(est, value=True)
    # the mirror case: the judge says no on every other query, and the bottom end is held at 0
    no = table("llm", doubly + rest, [0, 1, 0, 1] + [0] * 20)
    low = label_estimates(no, no, human, doubly)["hit@5"]
    assert 0.0 == low["ci_low"] <= low["mean"] <= low["ci_high"] <= 1.0
    assert low["clipped"] == "[0, 1]"


def test_an_interval_inside_the_range_is_left_as_it_is():
    doubly = [f"h{i}" for i in range(40)]
    halves = [float(i % 2) for i in range(40)]
    human = table("human", doubly, halves)
    llm = table("llm", [*doubly, *(f"u{i}" for i in range(40))], halves * 2)  # the judge agrees with people
    est = label_estimates(llm, llm, human, doubly)["hit@5"]
    assert 0.0 < est["ci_low"] < est["ci_high"] < 1.0
    assert "clipped" not in est and "clipped" not in source_label(est, value=True)
