"""`retbench diff` and `retbench compare` without --qrels, in process: two run files compared with no labels."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from retbench.cli import app

runner = CliRunner()


def _trec(path: Path, run: dict[str, list[str]]) -> Path:
    path.write_text(
        "".join(f"{q}\tQ0\t{d}\t{r}\t{9 - r}\tx\n" for q, docs in run.items() for r, d in enumerate(docs, 1))
    )
    return path


def test_compare_without_qrels_reports_movement_instead_of_refusing(tmp_path: Path) -> None:
    a = _trec(tmp_path / "a.trec", {"q1": ["d1", "d2", "d3"], "q2": ["d4", "d5"]})
    b = _trec(tmp_path / "b.trec", {"q1": ["d1", "d2", "d3"], "q2": ["d5", "d6"]})
    out = tmp_path / "c.json"
    res = runner.invoke(app, ["compare", str(a), str(b), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "1 of 2 queries (50.0%) change their top 10" in res.output
    assert json.loads(out.read_text())["changed_queries"] == ["q2"]


def test_diff_writes_the_html_page_with_the_moved_query(tmp_path: Path) -> None:
    a = _trec(tmp_path / "a.trec", {"q1": ["d1", "d2"], "q2": ["d4", "d5"]})
    b = _trec(tmp_path / "b.trec", {"q1": ["d1", "d2"], "q2": ["d5", "gone-not"]})
    page = tmp_path / "d.html"
    res = runner.invoke(app, ["diff", str(a), str(b), "--k", "2", "--html", str(page), "--resamples", "100"])
    assert res.exit_code == 0, res.output
    html = page.read_text()
    assert '<section id="moved">' in html and "gone-not" in html and "q2" in html
    bad = runner.invoke(app, ["diff", str(a), str(b), "--p", "1.5"])
    assert bad.exit_code == 2 and "p must lie strictly between 0 and 1" in bad.output
