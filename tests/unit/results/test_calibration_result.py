"""A judge calibration goes to disk and comes back through `results.calibration`; the lines read only it.

tests/fixtures/calibration_v1 holds metrics.json as the calibration wrote it before its result was typed
(token probabilities with AUC, every call failed with a ranking check, rubric metrics against human verdicts),
with the lines the command printed from it then (lines.txt).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_paths import TESTS
from retbench.report.judge import calibration_lines, rubric_calibration_lines
from retbench.results.calibration import (
    CalibrationResult,
    RubricCalibrationResult,
    read_calibration,
    write_calibration,
)

STORED = TESTS / "fixtures" / "calibration_v1"


@pytest.mark.parametrize("case", ["relevance", "no_verdict", "rubrics"])
def test_a_stored_calibration_reads_back_and_writes_out_byte_for_byte(case: str, tmp_path: Path) -> None:
    write_calibration(tmp_path, read_calibration(STORED / case))
    assert (tmp_path / "metrics.json").read_bytes() == (STORED / case / "metrics.json").read_bytes()


@pytest.mark.parametrize("case", ["relevance", "no_verdict"])
def test_the_calibration_lines_from_the_read_result_are_the_stored_ones(case: str) -> None:
    result = read_calibration(STORED / case)
    assert isinstance(result, CalibrationResult)
    assert "\n".join(calibration_lines(result)) + "\n" == (STORED / case / "lines.txt").read_text()


def test_the_rubric_lines_from_the_read_result_are_the_stored_ones() -> None:
    result = read_calibration(STORED / "rubrics")
    assert isinstance(result, RubricCalibrationResult)
    assert "\n".join(rubric_calibration_lines(result)) + "\n" == (STORED / "rubrics" / "lines.txt").read_text()


def test_a_missing_figure_reads_as_none_with_its_reason() -> None:
    result = read_calibration(STORED / "no_verdict")
    assert isinstance(result, CalibrationResult) and result.agreement is not None
    assert result.agreement.accuracy is None and "0 of 4 pairs judged" in (result.agreement.missing or "")
    assert result.ranking is not None and result.ranking.kendall_tau is None
    assert {s.llm for s in result.ranking.systems.values()} == {None}
    rubrics = read_calibration(STORED / "rubrics")
    assert isinstance(rubrics, RubricCalibrationResult)
    tone = rubrics.rubrics["tone"].agreement
    assert tone.kappa is not None and tone.kappa.value is None  # one class only: undefined, not 0
    assert rubrics.rubrics["completeness"].agreement.kappa_name == "weighted_kappa"
