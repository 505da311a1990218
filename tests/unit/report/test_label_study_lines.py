"""How a label study's answer reads: the winner only when the interval excludes 0, where the numbers come from,
rank intervals, and the low-judged caveat."""

from __future__ import annotations

from retbench.report.label_study import answer_lines


def _answer(low: float, high: float, judged: float = 0.97) -> dict:
    block = {"estimate": "PPI", "n_human": 180, "n_llm": 2400, "judged": judged}
    return {
        "metric": "nDCG@10",
        "estimand": "population",
        "alpha": 0.05,
        "systems": {
            "A": {**block, "mean": 0.5, "low": 0.48, "high": 0.52},
            "B": {**block, "mean": 0.53, "low": 0.51, "high": 0.55},
        },
        "difference": {**block, "a": "A", "b": "B", "mean": (low + high) / 2, "low": low, "high": high},
    }


def test_b_beats_a_only_when_the_interval_is_above_zero_and_the_line_says_where_labels_came_from():
    assert (
        answer_lines(_answer(0.01, 0.05))[0]
        == "B beats A by 0.0300 [0.0100, 0.0500] nDCG@10 (PPI, 180 human / 2,400 LLM labels, judged@10 0.97)"
    )
    assert answer_lines(_answer(-0.05, -0.01))[0].startswith("A beats B by 0.0300 [0.0100, 0.0500]")
    assert answer_lines(_answer(-0.01, 0.03))[0].startswith("no clear winner: B − A = 0.0100 [-0.0100, 0.0300]")


def test_a_system_with_a_low_judged_share_gets_the_usual_caveat_and_ranks_are_listed():
    ans = _answer(0.01, 0.05, judged=0.8)
    ans["ranks"] = {"A": [2, 3], "B": [1, 1]}
    text = "\n".join(answer_lines(ans))
    assert "A: only 80% of the top 10 documents carry a label (below 90%)" in text
    assert "rank intervals: A 2-3, B 1" in text
    assert "mean over the population the logged queries were drawn from" in text
