"""One source for every speed claim: the figures the docs quote are the latest run recorded in benchmarks/RESULTS.md.

`benchmarks/metrics_speed.py --figures F` and `benchmarks/bm25_speed.py --figures F` write a run's ratios to a
JSON file; RESULTS.md records it after a `<!-- speed-figures -->` line, and the docs quote each figure followed
by `<!-- figure: KEY -->`. A claim that a new run no longer supports fails here until the docs say so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("docs/benchmarks.md", "docs/limits.md")
MARK = re.compile(r"(\d[\d.]*x)<!-- figure: ([\w.]+) -->")
BLOCK = re.compile(r"<!-- speed-figures -->\s*```json\n(.*?)```", re.S)
RATIO = re.compile(r"\d(?:\.\d+)?x\b")


def latest_figures() -> dict[str, dict]:
    blocks = BLOCK.findall((ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8"))
    assert blocks, "benchmarks/RESULTS.md records no speed-figures block"
    figures = json.loads(blocks[-1])
    return {k: v for k, v in figures.items() if k != "runs"}


def quoted(page: str) -> list[tuple[str, str]]:
    """(key, figure as written) of every marked figure on a page."""
    text = (ROOT / page).read_text(encoding="utf-8")
    found = [(m.group(2), m.group(1)) for m in MARK.finditer(text)]
    assert len(found) == text.count("<!-- figure:"), f"{page}: a figure marker follows no ratio such as 4.1x"
    return found


def test_every_speed_figure_the_docs_quote_equals_the_latest_recorded_run():
    figures = latest_figures()
    seen = 0
    for page in PAGES:
        for key, shown in quoted(page):
            assert key in figures, f"{page} quotes {key}, which the latest recorded run does not have"
            assert shown == figures[key]["figure"], (
                f"{page}: {key} says {shown}, the latest run {figures[key]['figure']}"
            )
            seen += 1
    assert seen


def test_the_benchmarks_page_quotes_every_figure_of_the_latest_run():
    missing = set(latest_figures()) - {key for key, _ in quoted("docs/benchmarks.md")}
    assert not missing, f"docs/benchmarks.md does not quote {sorted(missing)}"


def test_the_speed_rows_of_the_benchmarks_page_hold_no_ratio_outside_the_record():
    lines = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if "metrics_speed.py" in line or "bm25_speed.py" in line]
    assert len(rows) == 2
    for row in rows:
        assert not RATIO.search(MARK.sub("", row)), f"an unrecorded ratio in: {row}"
