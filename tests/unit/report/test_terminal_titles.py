"""A table's title is printed whole at 80 columns: a split or transposed table's title ("part 1 of 2: columns 1-4 of
8") is often wider than the table part under it, and is then printed on its own line instead of folded into the
part's width."""

from __future__ import annotations

import io
import re
import sys

import pytest

from retbench.cli.app import console
from retbench.report.terminal import FittedTable


def printed_at(renderable: object, monkeypatch: pytest.MonkeyPatch, columns: int) -> str:
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setenv("COLUMNS", str(columns))
    con = console()
    assert con.width == columns
    con.print(renderable)
    return sys.stdout.getvalue()


def test_part_titles_of_a_wide_table_stay_on_one_line_at_80_columns(monkeypatch):
    metrics = [f"a-long-metric-name-{i}@10" for i in range(8)]
    rows = [[f"system-number-{s}", *(f"0.{s}{i}00" for i in range(8))] for s in range(6)]
    table = FittedTable(["system", *metrics], rows, title="quick: results/quick-experiment", corner="metric")
    text = printed_at(table, monkeypatch, 80)
    titles = [line.strip() for line in text.splitlines() if "part " in line]
    assert titles, text
    for title in titles:
        assert re.fullmatch(
            r"quick: results/quick-experiment \((transposed, )?part \d+ of \d+: columns \d+-\d+ of \d+\)", title
        ), text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_title_that_fits_its_table_stays_the_tables_own(monkeypatch):
    text = printed_at(
        FittedTable(["system", "recall@5", "ndcg@10"], [["bm25", "0.8123", "0.7000"]], title="t"), monkeypatch, 80
    )
    assert text.splitlines()[0].strip() == "t"
