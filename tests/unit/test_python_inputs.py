"""Python callers are held to the rules files are: every bad argument is one InputError naming it.

Statistics (`alpha`, `lam`, `n_resamples`, the value vectors) and the one-liners (`evaluate`, `compare`) refuse
what used to be a raw numpy/statistics error, a NaN or an absurd number.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from retbench.api import compare, evaluate
from retbench.errors import InputError
from retbench.stats import bootstrap_ci, classical_mean_ci, ppi_mean, ppi_mean_diff, randomization_test

HUMAN = [0.0, 1.0, 0.5, 1.0]
LLM_LAB = [0.2, 0.9, 0.5, 0.8]
LLM_UNL = [0.3, 0.7, 0.9]


CALLS = {
    "ppi_mean": lambda **kw: ppi_mean(HUMAN, LLM_LAB, LLM_UNL, **kw),
    "ppi_mean_diff": lambda **kw: ppi_mean_diff(HUMAN, LLM_LAB, HUMAN, LLM_LAB, LLM_UNL, LLM_UNL, **kw),
    "classical_mean_ci": lambda **kw: classical_mean_ci(HUMAN, **kw),
}
BAD = [("alpha", v) for v in (0, -1, 2, 1, float("nan"), float("inf"), "0.05", True, None)]
BAD += [("lam", v) for v in (float("nan"), 1e9, -0.1, 1.5, float("inf"), "1", True)]


@pytest.mark.parametrize(
    ("call", "name", "value"),
    [(c, n, v) for c in sorted(CALLS) for n, v in BAD if not (c == "classical_mean_ci" and n == "lam")],
)
def test_ppi_refuses_an_alpha_outside_zero_to_one_and_a_lam_outside_zero_to_one_naming_it(call, name, value):
    with pytest.raises(InputError) as err:
        CALLS[call](**{name: value})
    assert err.value.field == name


def test_ppi_takes_every_lam_from_zero_to_one_and_lam_zero_is_the_human_mean():
    for lam in (0, 0.0, 0.5, 1, np.float32(1.0), None):
        est, low, high = ppi_mean(HUMAN, LLM_LAB, LLM_UNL, lam=lam)
        assert math.isfinite(est) and low <= est <= high
    assert ppi_mean(HUMAN, LLM_LAB, LLM_UNL, lam=0)[0] == pytest.approx(float(np.mean(HUMAN)))


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ([[0.0, 1.0], [0.5, 1.0]], "must be 1-D"),
        (["0", "1", "0.5", "1"], "must hold numbers"),
        ([True, False, True, True], "must hold numbers"),
        ([[0.0, 1.0], [0.5]], "flat sequence"),
    ],
)
def test_ppi_refuses_two_d_string_and_boolean_vectors_naming_the_argument(values, needle):
    with pytest.raises(InputError, match=needle) as err:
        ppi_mean(values, LLM_LAB, LLM_UNL)
    assert err.value.field == "human"
    with pytest.raises(InputError, match=needle):
        ppi_mean_diff(HUMAN, values, LLM_LAB, LLM_LAB, LLM_UNL, LLM_UNL)


@pytest.mark.parametrize("n", [0, -5, 2.5, True, "100"])
def test_resampling_refuses_a_count_below_one_or_not_a_whole_number(n):
    deltas = np.array([0.1, -0.2, 0.3])
    for call in (lambda: randomization_test(deltas, n), lambda: bootstrap_ci(deltas, n)):
        with pytest.raises(InputError) as err:
            call()
        assert err.value.field == "n_resamples"


QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}}
RUNS = {"a": {"q1": {"d1": 1.0}, "q2": {"d9": 1.0}}, "b": {"q1": {"d1": 1.0}, "q2": {"d2": 1.0}}}


@pytest.mark.parametrize("n", [0, -5])
def test_compare_refuses_zero_or_negative_resamples_before_scoring(n):
    with pytest.raises(InputError, match="at least 1") as err:
        compare(RUNS, QRELS, ["mrr"], n_resamples=n)
    assert err.value.field == "n_resamples"
    from retbench.comparison import compare as compare_evaluations

    evs = [evaluate(QRELS, run, ["mrr"], name=name) for name, run in RUNS.items()]
    with pytest.raises(InputError):
        compare_evaluations(evs, n_resamples=n)
    assert compare(RUNS, QRELS, ["mrr"], n_resamples=1).pair("a", "b").metric("mrr").delta == 0.5


@pytest.mark.parametrize(
    ("qrels", "run", "field", "needle"),
    [
        ({"q1": {"": 1, "d1": 1}}, {"q1": {"d1": 0.5}}, "qrels['q1']", "document id is empty"),
        ({"q1": {"d1": 1}}, {"q1": {"": 0.9, "d1": 0.5}}, "run['q1']", "document id is empty"),
        ({"q1": {"d1": 1}}, {"q1": {"d1": "0.5"}}, "run['q1']['d1']", "score must be a number, got .0.5. \\(text\\)"),
        ({"q1": {"d1": 1}}, {"q1": {"d1": True, "d2": False}}, "run['q1']['d1']", "got True \\(a boolean\\)"),
        ({"q1": {"d1": 1}}, {"q1": [("d1", True)]}, "run['q1']", "got True \\(a boolean\\)"),
        ({"q1": {"d1": "1"}}, {"q1": {"d1": 0.5}}, "qrels['q1']['d1']", "grade must be an integer, got .1. \\(text\\)"),
        ({"q1": {"d1": 1.5}}, {"q1": {"d1": 0.5}}, "qrels['q1']['d1']", "grade must be an integer"),
    ],
)
def test_evaluate_holds_python_ids_scores_and_grades_to_the_file_rules(qrels, run, field, needle):
    with pytest.raises(InputError, match=needle) as err:
        evaluate(qrels, run, ["P@2"])
    assert err.value.field == field


@pytest.mark.parametrize("level", [float("nan"), float("inf"), 1.5, "1", True, -1])
def test_evaluate_refuses_a_relevance_level_that_is_not_a_whole_number_from_zero(level):
    with pytest.raises(InputError) as err:
        evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 0.5}}, ["P@2"], relevance_level=level)
    assert err.value.field == "relevance_level"


def test_numpy_numbers_and_whole_float_grades_are_still_numbers():
    ev = evaluate(
        {"q1": {"d1": np.int64(2), "d2": 1.0}},
        {"q1": {"d1": np.float32(0.5), "d2": 1}},
        ["P@2"],
        relevance_level=np.int64(2),
    )
    assert ev.means() == {"P@2": 0.5}
