"""The HTML report at real size in a real browser: 3, 6, 17 and 24 systems laid out by headless Chromium.

Each report is built by the real code path (`build_report` over a results directory the experiment
runner wrote: three BM25 variants over SciFact, or a real BM25 run and its seeded perturbations, see
tests/viewdata.py). A copy of the page gets one extra script that measures the laid-out page (bounding
boxes of every chart, legend entry and label) and clicks one legend entry; Chromium loads it once,
dumps the DOM with the measurements and takes a screenshot. The screenshots are kept under the test's
tmp_path and, when RETBENCH_ARTIFACTS names a folder, copied there.

Skipped, with the reason, when no Chromium is installed (`apt-get install -y chromium`).
"""

from __future__ import annotations

import html as html_lib
import json
import math
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import abdata
import viewdata
from retbench.report import fmt, plots
from retbench.report.html import render_html
from retbench.report.model import build_report
from retbench.results import read_results

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium not installed (Debian: apt-get install -y chromium)"
)
SVG = "{http://www.w3.org/2000/svg}"

# Runs in the test's copy of the page only: measures the layout and writes it into <pre id="layout-probe">.
PROBE = """
<script>
(function () {
  function box(el) { var r = el.getBoundingClientRect();
    return {l: r.left + scrollX, r: r.right + scrollX, t: r.top + scrollY, b: r.bottom + scrollY, w: r.width, h: r.height}; }
  var out = {viewport: window.innerWidth, page: document.documentElement.scrollWidth, charts: [], tables: []};
  Array.prototype.forEach.call(document.querySelectorAll('svg.chart'), function (svg) {
    var c = {kind: svg.getAttribute('data-chart'), box: box(svg), legend: [], outside: [], series: []};
    Array.prototype.forEach.call(svg.querySelectorAll('.legend-item'), function (item) {
      var line = item.querySelector('line'), mark = item.querySelector('[data-marker]');
      c.legend.push({name: item.getAttribute('data-series'), box: box(item),
        style: [mark ? mark.getAttribute('fill') : '', line ? (line.getAttribute('stroke-dasharray') || '') : '',
                mark ? mark.getAttribute('data-marker') : '']});
    });
    Array.prototype.forEach.call(svg.querySelectorAll('text'), function (t) {
      var b = box(t), s = c.box;
      if (b.w && (b.l < s.l - 1 || b.r > s.r + 1 || b.t < s.t - 1 || b.b > s.b + 1)) { c.outside.push(t.textContent); }
    });
    Array.prototype.forEach.call(svg.querySelectorAll('.series[data-series]'), function (el) {
      c.series.push(el.getAttribute('data-series'));
    });
    out.charts.push(c);
  });
  Array.prototype.forEach.call(document.querySelectorAll('.table-wrap'), function (w) {
    var th = w.querySelector('thead th'), td = w.querySelector('tbody td');
    out.tables.push({box: box(w), scrolls: w.scrollWidth > w.clientWidth,
      sticky: [th ? getComputedStyle(th).position : '', td ? getComputedStyle(td).position : '']});
  });
  var curve = document.querySelector('svg[data-chart="metric-curve"]');
  var item = curve && curve.querySelector('.legend-item');
  if (item) {
    var name = item.getAttribute('data-series');
    var line = Array.prototype.filter.call(curve.querySelectorAll('polyline'), function (p) {
      return p.getAttribute('data-series') === name; })[0];
    item.dispatchEvent(new MouseEvent('click', {bubbles: true}));
    out.hidden = {name: name, display: getComputedStyle(line).display, pressed: item.getAttribute('aria-pressed')};
    item.dispatchEvent(new MouseEvent('click', {bubbles: true}));
    out.shown_again = getComputedStyle(line).display;
  }
  var pre = document.createElement('pre'); pre.id = 'layout-probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""
SERIES_CHARTS = {"mean-ci", "metric-curve", "latency-ecdf"}  # one legend entry per system


def _results(base: Path, n: int) -> Path:
    """3: the three real BM25 variants (with per-query latency); more: BM25 and its perturbations."""
    return abdata.scifact_results(base) if n == 3 else viewdata.many_systems(base, n)


def _load(page: Path, profile: Path, shot: Path, width: int) -> dict:
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
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={width},3200",
        "--dump-dom",
        f"--screenshot={shot}",
        page.as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = re.search(r'<pre id="layout-probe">(.*?)</pre>', done.stdout, flags=re.S)
    assert probe, "the layout probe did not run"
    return {
        "layout": json.loads(probe.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")),
        "dom": done.stdout,
    }


def _keep(shot: Path) -> None:
    target = os.environ.get("RETBENCH_ARTIFACTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


def _inside(inner: dict, outer: dict) -> bool:
    return (
        inner["l"] >= outer["l"] - 1
        and inner["r"] <= outer["r"] + 1
        and inner["t"] >= outer["t"] - 1
        and inner["b"] <= outer["b"] + 1
    )


def _overlap(a: dict, b: dict) -> bool:
    return a["l"] < b["r"] - 1 and b["l"] < a["r"] - 1 and a["t"] < b["b"] - 1 and b["t"] < a["b"] - 1


@needs_chromium
@pytest.mark.slow
@pytest.mark.parametrize(("n", "width"), [(3, 1024), (6, 1280), (17, 720), (24, 1280)])
def test_every_system_has_a_visible_legend_entry_and_nothing_leaves_the_page(n, width, tmp_path_factory, tmp_path):
    data = build_report(read_results(_results(tmp_path_factory.getbasetemp(), n)), n_resamples=200)
    names = [s.name for s in data.systems]
    assert len(names) == n
    page = tmp_path / f"report_{n}.html"
    page.write_text(render_html(data).replace("</body>", PROBE + "</body>"), encoding="utf-8")
    shot = tmp_path / f"report_{n}_systems_{width}px.png"
    got = _load(page, tmp_path / "profile", shot, width)
    _keep(shot)
    lay = got["layout"]

    assert lay["page"] <= lay["viewport"], f"the page is {lay['page']} px wide in a {lay['viewport']} px window"
    charts = [c for c in lay["charts"] if c["kind"] in SERIES_CHARTS]
    assert {c["kind"] for c in charts} >= {"mean-ci", "metric-curve"}
    for c in lay["charts"]:
        assert c["box"]["r"] <= lay["viewport"] + 1, f"{c['kind']} chart runs off the page"
        assert not c["outside"], f"{c['kind']}: labels drawn outside the chart: {c['outside'][:5]}"
    for c in charts:
        entries = [e["name"] for e in c["legend"]]
        assert entries == names, f"{c['kind']}: legend {entries} != systems"
        assert set(c["series"]) <= set(names)
        for e in c["legend"]:
            assert e["box"]["w"] > 10 and e["box"]["h"] > 5 and _inside(e["box"], c["box"]), e
        for i, a in enumerate(c["legend"]):
            assert not any(_overlap(a["box"], b["box"]) for b in c["legend"][i + 1 :]), f"{a['name']} overlaps"
        styles = [tuple(e["style"]) for e in c["legend"]]
        assert len(set(styles)) == n, f"{c['kind']}: two systems drawn alike: {styles}"
    # wide tables scroll inside the page, header row and first column stay in view
    for t in lay["tables"]:
        assert t["box"]["r"] <= lay["viewport"] + 1
    summary = lay["tables"][0]
    assert summary["sticky"] == ["sticky", "sticky"]
    if n > 3:  # twenty metrics do not fit: the table scrolls instead of being clipped
        assert summary["scrolls"]
    # a click on a legend entry hides that system's line, a second shows it again
    assert lay["hidden"] == {"name": names[0], "display": "none", "pressed": "false"}
    assert lay["shown_again"] != "none"
    # the query selector says what its number is
    primary = fmt.metric_label(data.primary)
    legend = re.search(r'<p class="small muted" id="drill-legend">(.*?)</p>', got["dom"], flags=re.S).group(1)
    assert f"biggest change (by size) in {primary}" in legend and names[0] in legend
    assert re.search(r"<option [^>]*>[^<]*\(Δ [+-]\d\.\d{3}\)", got["dom"])


@needs_chromium
@pytest.mark.slow
def test_latency_by_stage_caption_renders_code_not_backticks(tmp_path_factory, tmp_path):
    data = build_report(read_results(abdata.scifact_results(tmp_path_factory.getbasetemp())), n_resamples=200)
    page = tmp_path / "report.html"
    shot = tmp_path / "stages.png"
    page.write_text(render_html(data).replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _load(page, tmp_path / "profile", shot, 1024)["dom"]
    section = dom.split('<section id="stages">', 1)[1].split("</section>", 1)[0]
    assert "<code>search</code>: wall time retbench measured" in section
    assert "`" not in section


def test_series_styles_are_unique_triples_well_past_24():
    triples = [plots.style(i) for i in range(160)]
    assert len(set(triples)) == 160
    assert {t.color for t in triples} == set(plots.PALETTE)  # only the colour-blind-safe palette


@needs_chromium
@pytest.mark.slow
def test_chunking_report_html_shows_report_md_tables_and_a_legend_entry_per_pair(tmp_path_factory, tmp_path):
    out = viewdata.chunking_study(tmp_path_factory.getbasetemp())
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<script src" not in html and not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    page = tmp_path / "chunking.html"
    page.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    shot = tmp_path / "chunking_report_1024px.png"
    got = _load(page, tmp_path / "profile", shot, 1024)
    _keep(shot)
    lay, dom = got["layout"], got["dom"]
    assert lay["page"] <= lay["viewport"]
    pairs = list(json.loads((out / "metrics.json").read_text())["systems"])
    (chart,) = [c for c in lay["charts"] if c["kind"] == "budget-recall"]
    assert [e["name"] for e in chart["legend"]] == pairs and not chart["outside"]
    assert all(t["sticky"] == ["sticky", "sticky"] for t in lay["tables"])
    # the HTML tables are report.md's tables, cell for cell (gathered once, rendered twice)
    md = [line for line in (out / "report.md").read_text().splitlines() if line.startswith("| ") and "---" not in line]
    # report.md's cells are Markdown source: entities and backslash escapes read as the characters they stand for
    md_rows = [
        [html_lib.unescape(re.sub(r"\\(.)", r"\1", c.strip())) for c in line.strip("| ").split(" | ")] for line in md
    ]
    html_rows = [
        [html_lib.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
        for row in re.findall(
            r"<tr>(.*?)</tr>", dom.split('id="chunks"', 1)[1].split('id="resources"', 1)[0], flags=re.S
        )
    ]
    assert html_rows == md_rows


@pytest.mark.slow
def test_without_a_browser_24_systems_each_get_one_legend_entry_laid_out_inside_the_svg(tmp_path_factory):
    """The same promise checked on the SVG markup (for machines without Chromium): the laid-out legend and
    direct labels, at the generous width estimate, end inside the chart's width."""
    data = build_report(read_results(viewdata.many_systems(tmp_path_factory.getbasetemp(), 24)), n_resamples=200)
    names = [s.name for s in data.systems]
    page = render_html(data)
    charts = [ET.fromstring(svg) for svg in re.findall(r"<svg .*?</svg>", page, flags=re.S)]
    series_charts = [c for c in charts if c.get("data-chart") in SERIES_CHARTS]
    assert len(series_charts) >= 4
    for c in series_charts:
        width = float(c.get("width"))
        items = [g for g in c.iter(f"{SVG}g") if g.get("class") == "legend-item"]
        assert [g.get("data-series") for g in items] == names
        for g in items:
            text = g.find(f"{SVG}text")
            assert float(text.get("x")) + plots.text_width(text.text) <= width
        drawn = {e.get("data-series") for e in c.iter() if e.get("class") in ("series", "series-mark")}
        assert drawn == set(names)


def _per_query(results: Path, system: str, metric: str) -> dict[str, float]:
    """One column of a system's per_query.tsv, read as plain TSV (not through retbench's reader)."""
    lines = [ln for ln in (results / "systems" / system / "per_query.tsv").read_text().splitlines() if ln[:1] != "#"]
    header = lines[0].split("\t")
    col = header.index(metric)
    return {r.split("\t")[0]: float(r.split("\t")[col]) for r in lines[1:]}


def _in_bar(d: float, bar: ET.Element) -> bool:
    lo, hi, kind = float(bar.get("data-lo")), float(bar.get("data-hi")), bar.get("data-kind")
    if kind == "unchanged":
        return d == 0.0
    return lo <= d < hi if kind == "worse" else lo < d <= hi


@needs_chromium
@pytest.mark.slow
def test_delta_histogram_bars_and_legend_equal_the_per_query_table(tmp_path_factory, tmp_path):
    results = abdata.scifact_results(tmp_path_factory.getbasetemp())
    data = build_report(read_results(results), n_resamples=200)
    page = tmp_path / "report.html"
    page.write_text(render_html(data).replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _load(page, tmp_path / "profile", tmp_path / "hist.png", 1024)["dom"]
    svgs = re.findall(r'<svg[^>]*data-chart="delta-histogram".*?</svg>', dom, flags=re.S)
    assert svgs, "no delta histogram in the page"
    for svg in svgs:
        root = ET.fromstring(svg)
        title = html_lib.unescape(root.find(f"{SVG}title").text)
        b_name, a_name = title.split(": ", 1)[1].split(" − ")
        a, b = _per_query(results, a_name, data.primary), _per_query(results, b_name, data.primary)
        deltas = [b[q] - a[q] for q in a if q in b and not math.isnan(b[q] - a[q])]
        bars = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"]
        # bars never mix signs; each query lies in exactly one bar, and each bar holds exactly its queries
        for bar in bars:
            lo, hi = float(bar.get("data-lo")), float(bar.get("data-hi"))
            assert (hi <= 0 or lo >= 0) and bar.get("fill") in {plots.WIN, plots.TIE, plots.LOSS}
            assert int(bar.get("data-count")) == sum(_in_bar(d, bar) for d in deltas), bar.attrib
        assert all(sum(_in_bar(d, bar) for bar in bars) == 1 for d in deltas)
        legend = " ".join(t.text for t in root.iter(f"{SVG}text") if t.text)
        for kind, n in (
            ("worse", sum(d < 0 for d in deltas)),
            ("unchanged", sum(d == 0 for d in deltas)),
            ("better", sum(d > 0 for d in deltas)),
        ):
            assert f"{kind}: {n}" in legend, (title, legend)
            assert n == sum(int(r.get("data-count")) for r in bars if r.get("data-kind") == kind)
