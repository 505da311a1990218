"""User text that looks like markup (query texts, document texts, system names) cannot break report.html.

A query holding `<!--<script>` once put the HTML parser into a script's "double escaped" state: the rest of
the page became the embedded JSON's text, so most tables and the per-query view never rendered. Here a real
experiment over a small SciFact slice whose queries, documents and system names carry such text is reported,
and headless Chromium (tests/support/browser.py) says what actually rendered: every table the page holds,
every section, the embedded data read back as written, and the per-query view of the hostile query.
"""

from __future__ import annotations

import gzip
import html as html_lib
import json
import re
from pathlib import Path

import pytest

import abdata
from browser import CHROMIUM, dump_dom
from retbench.report import plots
from retbench.report.html import render_html
from retbench.report.html_drill import DRILL_JS
from retbench.report.model import build_report
from retbench.results import read_results

HOSTILE = [
    "<!--<script> what lowers blood pressure?",
    "</script><!-- closes early & <b>bold</b>",
    "]]> --> <!-- \u2028line\u2029 'quoted' \"double\" `tick` **star** | pipe",
]
NAMES = ["bm25 <!--<script>", "weak **x** | `y` <b>"]  # a system name cannot hold "/" (it names a folder)

# Runs first (from <head>), whatever the body does to later scripts; reports what rendered after load.
PROBE = """<script>
window.addEventListener('load', function () {
  var view = document.getElementById('drill-view');
  var all = document.querySelectorAll('table').length, inView = view ? view.querySelectorAll('table').length : 0;
  var out = {tables: all - inView, sections: Array.prototype.map.call(document.querySelectorAll('main > section'),
    function (s) { return s.id; })};
  ['retbench-data', 'retbench-drill'].forEach(function (id) {
    try { out[id] = JSON.parse(document.getElementById(id).textContent); } catch (e) { out[id] = 'unreadable: ' + e; }
  });
  var h = view && view.querySelector('h3[data-query]');
  out.drill = h ? {id: h.getAttribute('data-query'), heading: h.textContent,
    systems: Array.prototype.map.call(view.querySelectorAll('.drill-system'),
      function (d) { return d.getAttribute('data-system'); })} : null;
  out.legend_items = document.querySelectorAll('.legend-item[aria-pressed]').length;
  var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.documentElement.appendChild(pre);
});
</script>"""


def _slice(base: Path) -> Path:
    """SciFact's first 12 test queries with their relevant documents and 150 others; three queries and one
    document rewritten to hold markup."""
    qrels = (abdata.SCIFACT / "qrels" / "test.tsv").read_text().splitlines()
    keep = list(dict.fromkeys(line.split("\t")[0] for line in qrels[1:]))[:12]
    rows = [line for line in qrels[1:] if line.split("\t")[0] in keep]
    relevant = {line.split("\t")[1] for line in rows}
    out = base / "hostile_beir"
    (out / "qrels").mkdir(parents=True)
    (out / "qrels" / "test.tsv").write_text("\n".join([qrels[0], *rows]) + "\n")
    with gzip.open(abdata.SCIFACT / "queries.jsonl.gz", "rt") as fh:
        queries = {q["_id"]: q for q in map(json.loads, fh) if q["_id"] in keep}
    for qid, text in zip(keep, HOSTILE, strict=False):
        queries[qid]["text"] = f"{text} {queries[qid]['text']}"
    (out / "queries.jsonl").write_text("".join(json.dumps(queries[q]) + "\n" for q in keep))
    docs = []
    with gzip.open(abdata.SCIFACT / "corpus.jsonl.gz", "rt") as fh:
        for i, doc in enumerate(map(json.loads, fh)):
            if doc["_id"] in relevant or i < 150:
                docs.append(doc)
    docs[0]["text"] = HOSTILE[0] + " " + HOSTILE[1] + " " + docs[0]["text"]
    (out / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    systems = {NAMES[0]: abdata.SYSTEMS["bm25"], NAMES[1]: abdata.SYSTEMS["bm25_weak"]}
    results = abdata.make_results(base / "results", systems, dataset={"name": str(_slice(base))})
    return build_report(read_results(results), n_resamples=50)


def test_the_embedded_data_holds_no_angle_bracket_and_reads_back_as_written(report):
    page = render_html(report)
    for block in re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', page, flags=re.S):
        assert not set(block) & set("<>&\u2028\u2029")
        assert json.loads(block)  # the escapes are JSON's own: the same strings come back
    drill = json.loads(re.search(r'id="retbench-drill">(.*?)</script>', page, flags=re.S).group(1))
    assert drill["systems"] == NAMES and any(q["text"].startswith(HOSTILE[0]) for q in drill["queries"])


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed (Debian: apt-get install -y chromium)")
def test_chromium_renders_every_table_section_and_the_per_query_view_of_a_hostile_query(report, tmp_path):
    source = render_html(report)
    tables = source.count("<table") - DRILL_JS.count("<table") - plots.LEGEND_JS.count("<table")
    sections = re.findall(r'<section id="([^"]+)">', source)
    page = tmp_path / "report.html"
    page.write_text(source.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    query = next(q for q in report.drill.queries if q["text"].startswith(HOSTILE[0]))
    dom = dump_dom(page, f"#q={query['id']}", tmp_path / "profile")
    probe = re.search(r'<pre id="probe">(.*?)</pre>', dom, flags=re.S)
    assert probe, "the probe did not run"
    got = json.loads(html_lib.unescape(probe.group(1)))
    assert got["tables"] == tables and tables >= 8
    assert got["sections"] == sections and "queries" in sections
    assert got["retbench-drill"] == json.loads(json.dumps(report.drill.to_json(), default=str))
    assert isinstance(got["retbench-data"], dict) and set(got["retbench-data"]["metrics"]["systems"]) == set(NAMES)
    assert got["drill"] == {"id": query["id"], "heading": f"{query['id']}: {query['text']}", "systems": NAMES}
    assert got["legend_items"] > 0  # the charts' legends are there for the legend script
