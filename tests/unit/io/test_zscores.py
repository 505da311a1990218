"""trec_eval's z-scores file and the z-scores made from it (trec_eval -Z)."""

from __future__ import annotations

import numpy as np
import pytest

from retbench.data import Run
from retbench.errors import InputError
from retbench.evaluation import evaluate
from retbench.evaluation.zscores import MISSING_ZSCORE, standardise
from retbench.io.zscores import read_zscores


def test_each_value_becomes_its_distance_from_the_mean_in_standard_deviations(tmp_path):
    path = tmp_path / "z"
    path.write_text("q1 P_1 0.25 0.5\nq1 map 1.0 0\nq2 P_1 1 0\n\nq2 map 0.5 0.25\n")
    run = Run.from_dict({"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 2.0, "d": 1.0}, "q3": {"e": 1.0}})
    ev = evaluate(run, {"q1": {"a": 1}, "q2": {"d": 1}, "q3": {"e": 1}}, ["P@1", "map", "num_q"])
    z = standardise(ev, read_zscores(path), ["P_1", "map", "num_q"])
    got = {q: z.values[i].tolist() for i, q in enumerate(z.query_ids)}
    # q1: (1 - 0.25) / 0.5; map 1 equals its mean with stddev 0 -> 0. q2: P 0 is not its mean 1 with stddev 0 ->
    # missing; map (0.5 - 0.5) / 0.25. q3 is not in the file: missing everywhere. num_q keeps counting queries.
    assert got == {
        "q1": [1.5, 0.0, 1.0],
        "q2": [MISSING_ZSCORE, 0.0, 1.0],
        "q3": [MISSING_ZSCORE, MISSING_ZSCORE, 1.0],
    }
    assert z.mean("num_q") == 3
    assert np.array_equal(ev.values[:, 2], z.values[:, 2])


@pytest.mark.parametrize(
    ("text", "words"),
    [("q1 map 0.5\n", "expected 4 fields"), ("q1 map x 0.1\n", "must be numbers"), ("q map 1 1\nq map 2 1\n", "twice")],
)
def test_a_malformed_zscores_line_is_refused_naming_file_and_line(tmp_path, text, words):
    path = tmp_path / "zscores"
    path.write_text(text)
    with pytest.raises(InputError, match=words) as err:
        read_zscores(path)
    assert f"{path}:{text.count(chr(10))}" in str(err.value)
