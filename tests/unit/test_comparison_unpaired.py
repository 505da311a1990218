"""A metric only one system has (scope_miss_rate exists for scoped systems alone) is not compared: no mean of
an empty set, no NaN in any report, one clear note naming the system it does not apply to."""

from __future__ import annotations

import re
import warnings

import numpy as np

from retbench.comparison import Comparison, adjust, compare_pair
from retbench.evaluation import Evaluation
from retbench.report.markdown import comparison_markdown

QIDS = [f"q{i}" for i in range(6)]


def scored(name: str, miss: float | None) -> Evaluation:
    recall = np.linspace(0.1, 0.9, len(QIDS)) + (0.05 if name == "scoped" else 0.0)
    scope = np.full(len(QIDS), np.nan if miss is None else miss)
    return Evaluation(name, ["recall@10", "scope_miss_rate"], QIDS, np.column_stack([recall, scope]), ["ok"] * 6)


def test_a_metric_that_applies_to_one_side_only_is_left_out_with_a_note_and_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Mean of empty slice" would raise here
        pair = compare_pair(scored("plain", None), scored("scoped", 0.5), n_resamples=200)
    assert [m.metric for m in pair.metrics] == ["recall@10"]
    assert pair.unpaired == {"scope_miss_rate": "'plain' has no value on any query (the metric does not apply to it)"}
    cmp = Comparison([pair], 200, 0)
    adjust(cmp.pairs)
    assert cmp.family == 1  # Holm corrects over the metrics compared only
    text = comparison_markdown(cmp)
    assert "Not compared: scope miss rate: 'plain' has no value on any query" in text
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)


def test_two_systems_without_the_metric_are_both_named() -> None:
    pair = compare_pair(scored("plain", None), scored("other", None), n_resamples=200)
    assert "'plain' and 'other' have no value" in pair.unpaired["scope_miss_rate"]
