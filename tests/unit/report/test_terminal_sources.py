"""The terminal summary names each mean's label source from the same estimate block as report.md and metrics.json."""

from __future__ import annotations

import io
import sys

import pytest

from retbench.cli.app import console
from retbench.estimates import estimate_block, source_label
from retbench.report.terminal import render_summary
from retbench.results import MetricValue, StudyManifest, StudyResult, SystemResult


def printed(renderable: object, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setenv("COLUMNS", "200")
    console().print(renderable)
    return sys.stdout.getvalue()


def test_a_ppi_corrected_judged_mean_is_printed_as_ppi_with_its_human_and_llm_counts(monkeypatch):
    ppi = estimate_block("ppi", 8, 22, 0.7125, 0.55, 0.875)
    llm = estimate_block("llm", 0, 30, 0.64, 0.5, 0.78)
    result = StudyResult(
        StudyManifest(),
        {
            "corrected": SystemResult("corrected", {"faithfulness": MetricValue(0.66, estimate=ppi)}),
            "plain": SystemResult("plain", {"faithfulness": MetricValue(0.64, estimate=llm)}),
            "people": SystemResult(
                "people", {"faithfulness": MetricValue(0.7, estimate=estimate_block("human", 30, 0, 0.7, 0.6, 0.8))}
            ),
        },
    )
    text = " ".join(printed(render_summary(result, ["faithfulness"]), monkeypatch).split())
    assert source_label(ppi, value=True) == "PPI 0.7125 [0.5500, 0.8750], 8 human / 22 LLM"
    assert "0.6600 (PPI 0.7125 [0.5500, 0.8750], 8 human / 22 LLM)" in text
    assert "0.6400 (LLM labels, judge bias uncorrected)" in text
    assert text.count("judge bias uncorrected") == 1  # only the system whose labels are LLM labels alone
