"""A document-values result goes to disk and comes back through `results.values`, and the report reads only it.

tests/fixtures/values_v1 holds summary.json, values.json and report.md as the values study wrote them before
its result was typed (the integration test's folder: exact values with a Monte-Carlo check, and a Monte-Carlo
estimate over BM25's ranking), so these tests pin the files on disk byte for byte.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from repo_paths import TESTS
from retbench.errors import InputError
from retbench.report.values import render_values_report
from retbench.results.values import DocumentValue, ValuesSummary, read_values, write_values

STORED = TESTS / "fixtures" / "values_v1"


@pytest.mark.parametrize("case", ["exact", "mc"])
def test_stored_values_files_read_back_and_write_out_byte_for_byte(case: str, tmp_path: Path) -> None:
    result = read_values(STORED / case, name="kb-values", top=10)
    write_values(tmp_path, result)
    for name in ("summary.json", "values.json"):
        assert (tmp_path / name).read_bytes() == (STORED / case / name).read_bytes(), name


@pytest.mark.parametrize("case", ["exact", "mc"])
def test_the_report_rendered_from_the_read_result_is_the_stored_report(case: str) -> None:
    result = read_values(STORED / case, name="kb-values", top=10)
    assert render_values_report(result) == (STORED / case / "report.md").read_text()


def test_the_read_result_is_typed_down_to_the_displaced_documents() -> None:
    s = read_values(STORED / "mc", name="kb-values").summary
    assert isinstance(s, ValuesSummary) and s.method == "monte_carlo" and s.monte_carlo is not None
    assert s.monte_carlo_check is None and s.monte_carlo.permutations == 300
    harm = {h.doc_id: h for h in s.harmful}
    assert harm["stuffed"].queries_hurt[0].displaced[0].doc_id == "whale"
    exact = read_values(STORED / "exact", name="kb-values").summary
    assert exact.monte_carlo is None and exact.monte_carlo_check is not None


def test_a_document_row_keeps_its_optional_fields_off_disk_when_absent() -> None:
    row = DocumentValue(1, "d1", "T", 0.5, 0.0, 2)
    assert row.to_dict() == {
        "rank": 1,
        "doc_id": "d1",
        "title": "T",
        "value": 0.5,
        "leave_one_out": 0.0,
        "relevant_for": 2,
    }
    full = dataclasses.replace(row, stderr=0.1, near_duplicate_group=0)
    assert DocumentValue.from_dict(full.to_dict()) == full


def test_a_missing_values_file_is_an_input_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found") as exc:
        read_values(tmp_path)
    assert "values.json" in str(exc.value)
