"""The SciFact study the report tests read (run once per session by the real runner) and its report."""

from __future__ import annotations

import pytest

import abdata
from retbench.report.model import build_report
from retbench.results import read_results


@pytest.fixture(scope="session")
def scifact_study(tmp_path_factory):
    return read_results(abdata.scifact_results(tmp_path_factory.getbasetemp()))


@pytest.fixture(scope="session")
def scifact_report(scifact_study):
    return build_report(scifact_study, n_resamples=200)
