"""Terminal tables at real size: 20 systems x 20 metrics, at 100 and 200 columns and piped (160).

A table never cuts a number or a name: it is printed as is when it fits, transposed when that fits,
else split into parts that each fit. The tests read the printed tables back cell by cell and compare
them with metrics.json, so a value that was cut, dropped or put in the wrong column fails.
"""

from __future__ import annotations

import html
import io
import sys

import pytest
from typer.testing import CliRunner

import viewdata
from retbench.cli import app
from retbench.cli.app import console
from retbench.report.terminal import FittedTable, render_summary
from retbench.results import StudyResult, read_results


def read_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header, rows) of every rich table in `text` (cells stripped; a wrapped cell's lines joined)."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    rows: list[list[str]] | None = None
    header: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("┃"):
            cells = [c.strip() for c in s.strip("┃").split("┃")]
            header = [f"{a} {b}".strip() for a, b in zip(header, cells, strict=True)] if header else cells
        elif s.startswith("┡"):
            rows = []
            tables.append((header, rows))
            header = []
        elif s.startswith("│") and rows is not None:
            cells = [c.strip() for c in s.strip("│").split("│")]
            if rows and all(c == "" for c in cells[1:]):  # the key cell wrapped onto another line
                rows[-1][0] += cells[0]
            else:
                rows.append(cells)
        elif s.startswith("└"):
            rows = None
    return tables


def cells_of(text: str) -> dict[tuple[str, str], str]:
    """(system, column) -> printed cell, from plain or transposed tables alike."""
    out: dict[tuple[str, str], str] = {}
    for header, rows in read_tables(text):
        transposed = header[0] == "metric"
        for row in rows:
            for col, cell in zip(header[1:], row[1:], strict=True):
                key = (col, row[0]) if transposed else (row[0], col)
                assert key not in out or out[key] == cell, key
                out[key] = cell
    return out


def expected_cells(result: StudyResult, metrics: list[str]) -> dict[tuple[str, str], str]:
    return {(s.name, m): f"{s.metrics[m].value:.4f}" for s in result for m in metrics}


@pytest.fixture(scope="module")
def twenty(tmp_path_factory):
    out = viewdata.many_systems(tmp_path_factory.getbasetemp(), 20)
    return out, read_results(out)


def _printed(renderable, monkeypatch, columns: str | None) -> tuple[str, int]:
    """What the CLI's console prints with stdout piped and `COLUMNS` set (or not), and the width it used."""
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    con = console()
    con.print(renderable)
    return sys.stdout.getvalue(), con.width


@pytest.mark.slow
@pytest.mark.parametrize(("columns", "width"), [("100", 100), ("200", 200), (None, 160)])
def test_twenty_systems_by_twenty_metrics_print_every_number_and_name_in_full(twenty, monkeypatch, columns, width):
    out, mj = twenty
    metrics = viewdata.METRICS20
    text, used = _printed(render_summary(mj, metrics, title=f"{out.name}: results"), monkeypatch, columns)
    assert used == width
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    got = cells_of(text)
    want = expected_cells(mj, metrics)
    assert {k: got.get(k) for k in want} == want
    for s in mj:
        cov = s.coverage
        assert got[(s.name, "scored")] == f"{cov['answered']} of {cov['judged']}"
    names = {k[0] for k in got} | {k[1] for k in got}
    assert set(mj.systems) <= names and set(metrics) <= names


@pytest.mark.slow
def test_three_systems_by_twenty_metrics_transpose_into_one_table_at_100_columns(tmp_path_factory, monkeypatch):
    out = viewdata.many_systems(tmp_path_factory.getbasetemp(), 3)
    mj = read_results(out)
    text, _ = _printed(render_summary(mj, viewdata.METRICS20, title="three"), monkeypatch, "100")
    tables = read_tables(text)
    assert len(tables) == 1 and tables[0][0] == ["metric", *mj.systems]  # systems are the columns
    assert "transposed to fit 100 columns" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    got = cells_of(text)
    want = expected_cells(mj, viewdata.METRICS20)
    assert {k: got.get(k) for k in want} == want


def test_a_table_that_fits_prints_as_it_is_and_a_name_wider_than_the_console_wraps_uncut(monkeypatch):
    small = FittedTable(["system", "recall@5"], [["bm25", "0.8123"]], title="t")
    text, _ = _printed(small, monkeypatch, "100")
    assert read_tables(text) == [(["system", "recall@5"], [["bm25", "0.8123"]])]
    long = "a-system-name-that-is-longer-than-the-whole-console-is-wide-" * 2
    text, _ = _printed(FittedTable(["system", "recall@5"], [[long, "0.8123"]]), monkeypatch, "60")
    assert max(len(line) for line in text.splitlines()) <= 60
    assert read_tables(text)[0][1] == [[long, "0.8123"]]


@pytest.mark.slow
def test_retbench_run_piped_at_100_columns_cuts_no_number(twenty):
    out, mj = twenty
    result = CliRunner().invoke(app, ["run", str(out.with_suffix(".yaml")), "--no-history"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 100
    got = cells_of(result.output)
    want = expected_cells(mj, viewdata.METRICS20)
    assert {k: got.get(k) for k in want} == want


def markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header, rows) of every Markdown table in a report.md."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    block: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            # report.md escapes `<` and `&` in cells (so no text can open HTML); the terminal prints them plain
            block.append([html.unescape(c.strip()) for c in line.strip().strip("|").split(" | ")])
        elif block:
            tables.append((block[0], block[2:]))
            block = []
    return tables


def keyed(header: list[str], rows: list[list[str]], keys: int) -> dict[tuple[str, str], str]:
    """(row key, column) -> cell; the key is the row's key cells joined by " / " (as a transposed table heads them)."""
    return {(" / ".join(r[:keys]), h): c for r in rows for h, c in zip(header[keys:], r[keys:], strict=True)}


def printed_cells(text: str, keys: int) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for header, rows in read_tables(text):
        if header[0] == "column":  # transposed: one column per row key
            out |= {(h, r[0]): c for r in rows for h, c in zip(header[1:], r[1:], strict=True)}
        elif len(header) > keys:
            out |= keyed(header, rows, keys)
    return out


@pytest.mark.slow
def test_retbench_chunking_prints_both_tables_whole_at_100_columns(tmp_path_factory):
    out = viewdata.chunking_study(tmp_path_factory.getbasetemp())
    result = CliRunner().invoke(app, ["chunking", str(out.with_suffix(".yaml"))], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 100
    assert "…" not in result.output and "Fixed context budget" in result.output
    (head, rows), (bhead, brows) = markdown_tables((out / "report.md").read_text())[:2]
    # the terminal reads the same tables as report.md (all chunks: keyed by chunker and system; budget: plus budget)
    main, budget = result.output.split("Larger chunks win recall@k trivially", 1)
    want = keyed(head, rows, 2)
    got = printed_cells(main, 2)
    assert {k: got.get(k) for k in want} == want
    want = keyed(bhead, brows, 3)
    got = printed_cells(budget, 3)
    assert {k: got.get(k) for k in want} == want
