"""The HTML report's per-query drill-down (data plus one small inline script) and its metric@k curves.

The drill-down data is embedded as JSON (`<script type="application/json" id="retbench-drill">`) and
rendered by the inline script below: no library, no network, so the page still opens offline as one
file. `#q=<query id>` in the address opens that query; `#changed` opens the most-changed filter.
"""

from __future__ import annotations

from html import escape

from retbench.report import fmt, plots
from retbench.report.drilldown import Drill
from retbench.report.html_page import script_json
from retbench.report.model import ReportData

DRILL_JS = """
(function () {
  var D = JSON.parse(document.getElementById('retbench-drill').textContent);
  var sel = document.getElementById('drill-query'), box = document.getElementById('drill-changed');
  var out = document.getElementById('drill-view');
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) {
    return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; }); }
  function num(v) { return v === null || v === undefined ? '—' : Number(v).toFixed(4); }
  function fill() {
    var qs = D.queries.slice();
    if (box.checked) {
      qs = qs.filter(function (q) { return q.change; })
        .sort(function (a, b) { return Math.abs(b.change) - Math.abs(a.change); }).slice(0, 25);
    }
    sel.innerHTML = qs.map(function (q) {
      var c = q.change ? ' (Δ ' + (q.change > 0 ? '+' : '') + q.change.toFixed(3) + ')' : '';
      return '<option value="' + esc(q.id) + '">' + esc(q.id) + c + ' ' + esc(q.text.slice(0, 80)) + '</option>';
    }).join('');
  }
  function show(id) {
    var q = D.queries.filter(function (x) { return x.id === id; })[0];
    if (!q) { out.innerHTML = '<p class="muted">No query selected.</p>'; return; }
    var h = '<h3 data-query="' + esc(q.id) + '">' + esc(q.id) + ': ' + esc(q.text) + '</h3>';
    h += '<div class="table-wrap"><table class="drill-metrics"><thead><tr><th>system</th>' + D.metrics.map(function (m) {
      return '<th class="num">' + esc(m) + '</th>'; }).join('') + '</tr></thead><tbody>';
    D.systems.forEach(function (s) {
      var v = q.values[s] || [];
      h += '<tr><td>' + esc(s) + '</td>' + D.metrics.map(function (m, j) {
        return '<td class="num" data-system="' + esc(s) + '" data-qmetric="' + esc(m) + '">' + num(v[j]) + '</td>'; }).join('') + '</tr>';
    });
    h += '</tbody></table></div><div class="drill-systems">';
    D.systems.forEach(function (s) {
      h += '<div class="drill-system" data-system="' + esc(s) + '"><h4>' + esc(s) + ': top ' + D.k + '</h4>';
      h += '<table class="drill-top"><thead><tr><th class="num">rank</th><th>document</th><th class="num">score</th>' +
        '<th class="num">grade</th><th>text</th></tr></thead><tbody>';
      q.top[s].forEach(function (r, i) {
        var rel = r[2] !== null && r[2] > 0 ? ' class="rel"' : '';
        h += '<tr' + rel + ' data-doc="' + esc(r[0]) + '"><td class="num">' + (i + 1) + '</td><td>' + esc(r[0]) +
          '</td><td class="num">' + Number(r[1]).toFixed(3) + '</td><td class="num">' + (r[2] === null ? '·' : r[2]) +
          '</td><td class="small">' + esc(D.docs[r[0]] || '') + '</td></tr>';
      });
      h += '</tbody></table>';
      var missed = q.missed[s];
      h += missed.length ? '<p class="small"><b>Relevant, not in the top ' + D.k + ':</b></p><ul class="drill-missed">' +
        missed.map(function (m) { return '<li data-doc="' + esc(m[0]) + '">' + esc(m[0]) + ' (grade ' + m[1] + ', ' +
          (m[2] ? 'rank ' + m[2] : 'not retrieved') + ') <span class="small muted">' + esc(D.docs[m[0]] || '') +
          '</span></li>'; }).join('') + '</ul>' : '<p class="small muted">Every relevant document is in the top ' + D.k + '.</p>';
      var why = (q.reasons || {})[s] || [];
      h += why.length ? '<p class="small"><b>Verdicts and reasoning of the LLM judge:</b></p><dl class="drill-reasons">' +
        why.map(function (r) { return '<dt data-rmetric="' + esc(r[0]) + '">' + esc(r[0]) + ': <span class="verdict">' +
          esc(r[1]) + '</span></dt><dd class="small">' + (r[2] ? esc(r[2]) : '<span class="muted">no reasoning given</span>') +
          '</dd>'; }).join('') + '</dl>' : '';
      h += '</div>';
    });
    out.innerHTML = h + '</div>';
  }
  sel.onchange = function () { show(sel.value); };
  box.onchange = function () { fill(); show(sel.value); };
  box.checked = location.hash === '#changed';
  fill();
  var want = location.hash.indexOf('#q=') === 0 ? decodeURIComponent(location.hash.slice(3)) : '';
  if (want) { sel.value = want; }
  show(want || sel.value);
})();
"""

DRILL_CSS = """
.drill-controls { display:flex; gap:16px; align-items:center; flex-wrap:wrap; }
.drill-controls select { max-width: min(720px, calc(100vw - 120px)); font-size: 14px; padding: 4px; }
.drill-systems { display:flex; flex-wrap:wrap; gap: 8px 28px; }
.drill-system { flex: 1 1 520px; min-width: 0; }
table.drill-top td, table.drill-top th, table.drill-metrics td, table.drill-metrics th { padding: 4px 6px; font-size: 13px; }
tr.rel td { background: #e8f5ee !important; }
dl.drill-reasons dt { font-size: 13px; margin-top: 4px; } dl.drill-reasons dd { margin: 0 0 4px 16px; white-space: pre-wrap; }
"""


def drill_section(data: ReportData) -> str:
    """The drill-down section (empty when the dataset behind the results could not be read)."""
    if data.drill is None:
        reason = "several datasets" if data.leaderboard is not None else "the dataset could not be found"
        return f'<p class="muted">No per-query drill-down ({reason}).</p>'
    blob = script_json(data.drill.to_json())
    change = (
        f"changed most on {escape(fmt.metric_label(data.drill.primary))} against {escape(data.drill.baseline)}"
        if data.drill.baseline
        else "changed most"
    )
    return (
        f"<style>{DRILL_CSS}</style>"
        '<div class="drill-controls"><label>Query <select id="drill-query"></select></label>'
        f'<label><input type="checkbox" id="drill-changed"> only the 25 queries that {change}</label></div>'
        f'<p class="small muted" id="drill-legend">{_selector_note(data.drill)}</p>'
        '<div id="drill-view"></div>'
        f'<script type="application/json" id="retbench-drill">{blob}</script>'
        f"<script>{DRILL_JS}</script>"
        '<p class="small muted">Rows shaded green are judged relevant; grade · means not judged. '
        "Open a query directly with <code>#q=&lt;query id&gt;</code> in the address.</p>"
    )


def _selector_note(drill: Drill) -> str:
    """What the number after a query id in the selector means."""
    if not drill.baseline:
        return "Each entry is a query id and the start of its text."
    m = escape(fmt.metric_label(drill.primary))
    return (
        f"Each entry is a query id, then (Δ ±x.xxx): the biggest change (by size) in {m} on that query of any system "
        f"against the baseline {escape(drill.baseline)} (system − baseline, so + means a system did better on it; "
        "no number: every system scored as the baseline did), then the start of the query's text."
    )


def k_curve_figures(drill: Drill) -> str:
    """recall@k, nDCG@k and hit@k for every k up to the run depth, computed from the runs."""
    figs = []
    for fam, by_system in drill.curves.items():
        series = [plots.Series(s, list(range(1, len(v) + 1)), v) for s, v in by_system.items() if v]
        if not series:
            continue
        depth = max(len(s.xs) for s in series)
        svg = plots.line_chart(
            series,
            title=f"{fmt.metric_label(fam)}@k per system, k = 1 to {depth}",
            kind="metric-curve",
            x_label="k (results looked at)",
            y_label=f"{fmt.metric_label(fam)}@k",
            x_log=depth >= 20,
            y_range=(0.0, 1.0),
            markers=depth <= 20,
        )
        figs.append(
            f"<figure>{svg}<figcaption>{escape(fmt.metric_label(fam))}@k at every k from 1 to {depth}, computed from "
            f"the stored runs: {escape(fmt.metric_meaning(fam + '@k'))}.</figcaption></figure>"
        )
    return f'<div class="charts">{"".join(figs)}</div>'
