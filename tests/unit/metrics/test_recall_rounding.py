"""Where recall level p falls among a query's R relevant documents (iprec_at_recall, 11pt_avg): trec_eval 10.0
rounds p * R to the nearest whole number (lround), trec_eval 9 and pytrec_eval take (long)(p * R + 0.9). The
trec_eval mode follows 10.0, the pytrec_eval mode 9; either can be asked for by name. Values by hand."""

from __future__ import annotations

import numpy as np
import pytest

from retbench.data import Qrels, Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.metrics.settings import EvalSettings
from retbench.metrics.trec_more import recall_cutoff

# R = 4 relevant documents found at ranks 1, 3, 7 and 8: precision 1, 2/3, 3/7, 1/2 at each of them, so the
# interpolated precision once c of them are found is 1 (c = 1), 2/3 (c = 2), 1/2 (c = 3 or 4)
QRELS = {"q": {"r1": 1, "r2": 1, "r3": 1, "r4": 1}}
RANKED = ["r1", "n1", "r2", "n2", "n3", "n4", "r3", "r4"]
RUN = {"q": {d: float(len(RANKED) - i) for i, d in enumerate(RANKED)}}
NAMES = ["iprec_at_recall.0.6", "iprec_at_recall.0.3", "11pt_avg"]


def _means(**kw):
    ev = evaluate(Run.from_dict(RUN), Qrels(QRELS), NAMES, **kw)
    return [ev.values[0, j] for j in range(len(NAMES))], ev


def test_the_trec_eval_mode_rounds_recall_levels_as_trec_eval_10_does():
    (at_06, at_03, eleven), ev = _means()
    # p = 0.6: 0.6 x 4 = 2.4 rounds to 2 documents -> 2/3 (trec_eval 9: floor(3.3) = 3 -> 1/2)
    assert at_06 == pytest.approx(2 / 3)
    # p = 0.3: 1.2 rounds to 1 -> 1 (trec_eval 9: floor(2.1) = 2 -> 2/3)
    assert at_03 == 1.0
    # the 11 levels take 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4 documents (0 reads as 1): 1 x 4 + 2/3 x 3 + 1/2 x 4
    assert eleven == pytest.approx(8 / 11)
    assert ev.recall_rounding == "round" and ev.settings().recall_rule == "round"


def test_the_pytrec_eval_mode_keeps_trec_eval_9s_floor_plus_0_9():
    (at_06, at_03, eleven), ev = _means(mode="pytrec_eval")
    assert (at_06, at_03) == (0.5, pytest.approx(2 / 3))
    # 9's levels take 0, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4 documents: 1 x 3 + 2/3 x 3 + 1/2 x 5
    assert eleven == pytest.approx(7.5 / 11)
    assert ev.recall_rounding == "floor_plus_0.9"


def test_either_rule_can_be_asked_for_in_either_mode():
    assert _means(recall_rounding="floor_plus_0.9")[0][0] == 0.5
    assert _means(mode="pytrec_eval", recall_rounding="round")[0][0] == pytest.approx(2 / 3)
    with pytest.raises(ConfigError, match="recall rounding 'ceil'"):
        _means(recall_rounding="ceil")


def test_halves_round_away_from_zero_and_just_below_a_half_rounds_down():
    r = np.array([5, 5, 1, 3], dtype=np.int64)
    # 0.5 x 5 = 2.5 -> 3 (lround: halves away from zero); 0.1 x 5 = 0.5 -> 1; 0.3 x 1 = 0.3 -> 0; 0.5 x 3 -> 2
    assert recall_cutoff(0.5, r[:1], "round").tolist() == [3]
    assert recall_cutoff(0.1, r[1:2], "round").tolist() == [1]
    assert recall_cutoff(0.3, r[2:3], "round").tolist() == [0]
    assert recall_cutoff(0.5, r[3:], "round").tolist() == [2]
    # the largest double below 0.5 times 1 stays below a half: lround gives 0 where floor(x + 0.5) would give 1
    below_half = np.nextafter(0.5, 0.0)
    assert recall_cutoff(below_half, np.array([1]), "round").tolist() == [0]
    assert recall_cutoff(0.3, r[2:3], "floor_plus_0.9").tolist() == [1]


def test_fingerprints_record_the_rule_only_where_it_is_not_the_modes_own():
    assert "recall_rounding" not in EvalSettings().to_dict()  # finished cells are not scored again
    assert "recall_rounding" not in EvalSettings(mode="pytrec_eval").to_dict()
    assert EvalSettings(recall_rounding="floor_plus_0.9").to_dict()["recall_rounding"] == "floor_plus_0.9"
    assert EvalSettings(mode="pytrec_eval", recall_rounding="round").to_dict()["recall_rounding"] == "round"
