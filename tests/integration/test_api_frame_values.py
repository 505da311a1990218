"""DataFrames given to the Python API follow the rules dicts do: text and booleans are not scores or grades."""

from __future__ import annotations

import pandas as pd
import pytest

from retbench.api import evaluate
from retbench.errors import InputError


def test_a_text_score_column_is_refused_naming_its_row():
    run = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["d1", "d2"], "score": [0.5, "0.4"]})
    with pytest.raises(InputError, match=r"score must be a number, got .0.4. \(text\)") as err:
        evaluate({"q1": {"d1": 1}}, run, ["P@2"])
    assert err.value.field == "score[1]"


def test_a_text_grade_column_is_refused_and_a_numeric_one_scores():
    run = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["d1", "d2"], "score": [0.5, 0.4]})
    qrels = pd.DataFrame({"qid": ["q1"], "docno": ["d1"], "label": ["1"]})
    with pytest.raises(InputError, match=r"grade must be an integer, got .1. \(text\)") as err:
        evaluate(qrels, run, ["P@2"])
    assert err.value.field == "label[0]"
    assert evaluate(qrels.assign(label=[1]), run, ["P@2"]).means() == {"P@2": 0.5}
