"""The HTML report in a real browser: headless Chromium (Debian's `chromium`) renders it offline.

Skipped, with the reason, when no Chromium is installed (`apt-get install -y chromium`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

import abdata
from retbench.report.html import render_html
from retbench.report.model import build_report
from retbench.results import read_results

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed (Debian: apt-get install -y chromium)")


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


class DomIndex(HTMLParser):
    """What the rendered DOM holds: charts by kind, mean cells by (system, metric), the data blob."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: list[str] = []
        self.cells: dict[tuple[str, str], dict[str, str]] = {}
        self._cell: tuple[str, str] | None = None
        self._blob = False
        self.blob = ""
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "svg" and a.get("data-chart"):
            self.charts.append(a["data-chart"])
        if tag == "td" and "data-metric" in a:
            self._cell = (a["data-system"], a["data-metric"])
            self.cells[self._cell] = {"value": a["data-value"], "text": ""}
        if tag == "script" and a.get("id") == "retbench-data":
            self._blob = True
        self._in_title = tag == "h1"

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        if tag == "script":
            self._blob = False
        if tag == "h1":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self.cells[self._cell]["text"] += data
        if self._blob:
            self.blob += data
        if self._in_title:
            self.title += data


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, Path]:
    results = abdata.scifact_results(tmp_path_factory.getbasetemp())
    out = tmp_path_factory.mktemp("html") / "report.html"
    out.write_text(render_html(build_report(read_results(results), n_resamples=500)), encoding="utf-8")
    return out, results


def test_chromium_renders_the_report_with_plots_and_the_json_numbers(page, tmp_path):
    html, results = page
    done = chromium(html, tmp_path / "profile", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = DomIndex()
    dom.feed(done.stdout)
    assert dom.title == "scifact_ab"
    assert sorted(dom.charts) == sorted(
        [
            "mean-ci",
            "metric-curve",
            "metric-curve",
            "metric-curve",
            "delta-histogram",
            "delta-histogram",
            "coverage",
            "tradeoff",  # quality vs mean latency; BM25 answers in one timed batch: no p50/p95 or distribution
            "pr-curve",
        ]
    )
    metrics = json.loads((results / "metrics.json").read_text())
    assert json.loads(dom.blob)["metrics"] == metrics
    for system, row in metrics["systems"].items():
        for metric, stored in row["metrics"].items():
            mean = stored["value"]
            cell = dom.cells[(system, metric)]
            assert float(cell["value"]) == mean
            assert cell["text"].startswith(f"{mean:.4f}")


def test_chromium_screenshot_is_not_blank(page, tmp_path):
    image = pytest.importorskip("PIL.Image", reason="Pillow is needed to read the screenshot")
    html, _ = page
    shot = tmp_path / "shot.png"
    done = chromium(html, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,1600")
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    with image.open(shot) as im:
        dark = sum(im.convert("L").histogram()[:128])  # text and axes
        saturated = sum(im.convert("RGB").convert("HSV").getchannel("S").histogram()[120:])  # chart colours
    assert dark > 2000, "the page rendered (almost) no text"
    assert saturated > 2000, "no coloured chart marks in the first screen"
