"""The page kit every retbench HTML report shares: one stylesheet, escaping, notes, tables and the page shell.

Kept apart from the results report (report/html.py) so the chunking, impact and other reports build the same
self-contained page (inline CSS and script, no network) without importing the results report's sections.
"""

from __future__ import annotations

import json
import re
from html import escape

from retbench.report import plots

LEGEND_HINT = "Click a name in a chart's legend to hide or show that system; double-click it to show only that system."

CSS = """
:root { --ink:#1f2328; --muted:#59626d; --line:#d8dee4; --soft:#f6f8fa; --accent:#0072B2; --bad:#D55E00; --good:#009E73; }
* { box-sizing: border-box; }
body { margin:0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); background: #fff; }
main { max-width: 1240px; margin: 0 auto; padding: 32px 28px 64px; }
header { border-bottom: 1px solid var(--line); margin-bottom: 8px; padding-bottom: 12px; }
h1 { font-size: 28px; margin: 0 0 4px; letter-spacing: -0.01em; }
h2 { font-size: 20px; margin: 36px 0 10px; padding-top: 8px; border-top: 1px solid var(--line); }
section:first-of-type h2 { border-top: none; margin-top: 20px; }
h3 { font-size: 16px; margin: 22px 0 8px; }
p, li { max-width: 80ch; }
.muted { color: var(--muted); }
.small { font-size: 13px; }
nav { font-size: 14px; margin: 10px 0 0; }
nav a { color: var(--accent); text-decoration: none; margin-right: 14px; }
.badge { display:inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600;
         background: var(--soft); border: 1px solid var(--line); margin-right: 6px; }
.badge.warn { background:#fff4e5; border-color:#f0c36d; color:#7a4b00; }
.badge.bad { background:#fdecea; border-color:#f1a89b; color:#8a1c0a; }
.table-wrap { overflow: auto; max-height: 80vh; margin: 8px 0 16px; max-width: 100%; }
.table-wrap > table { margin: 0; }
.table-wrap thead th { position: sticky; top: 0; z-index: 2; box-shadow: inset 0 -1px 0 var(--line); }
.table-wrap tbody td:first-child { position: sticky; left: 0; z-index: 1; background: #fff;
       box-shadow: inset -1px 0 0 var(--line); }
.table-wrap tbody tr:nth-child(even) td:first-child { background: #fbfcfd; }
.table-wrap thead th:first-child { left: 0; z-index: 3; box-shadow: inset -1px -1px 0 var(--line); }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 14px; }
th, td { padding: 6px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) td { background: #fbfcfd; }
td .ci { display:block; color: var(--muted); font-size: 12px; }
td.best { font-weight: 700; }
td.nowrap { white-space: nowrap; }
table.compare th, table.compare td, table.summary th, table.summary td { padding: 5px 8px; font-size: 13px; }
td.pos { color: var(--accent); } td.neg { color: var(--bad); }
.sig { font-weight: 700; }
figure { margin: 12px 0 24px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; max-width: 80ch; }
.charts { display: flex; flex-wrap: wrap; gap: 8px 24px; }
svg.chart { max-width: 100%; height: auto; background: #fff; }
.chart-hint { margin: 0 0 6px; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; background: var(--soft);
       padding: 1px 4px; border-radius: 4px; }
details { margin: 8px 0; } summary { cursor: pointer; color: var(--accent); }
footer { margin-top: 40px; font-size: 13px; color: var(--muted); border-top: 1px solid var(--line); padding-top: 12px; }
@media print { h2 { break-before: auto; } nav { display: none; } }
"""


def attr(v: object) -> str:
    """A value as an escaped attribute text."""
    return escape(str(v), quote=True)


# Inside <script>, the HTML parser ends the element at `</script` and, after `<!--<script`, swallows the page up to
# a later `-->` or `</script>`: the JSON text must hold no `<` at all. `>` and `&` go too (an HTML comment's end,
# entities), and U+2028/U+2029, which older JavaScript parsers read as line ends. Each `\uXXXX` is the same
# string to JSON.parse, so the data reads back unchanged.
_SCRIPT_SAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_json(value: object) -> str:
    """`value` as JSON text that is inert inside a `<script type="application/json">` element (see above)."""
    text = json.dumps(value, allow_nan=False, default=str)
    return re.sub("[<>&\u2028\u2029]", lambda m: _SCRIPT_SAFE[m.group()], text)


def inline_markdown(text: str) -> str:
    """A note written for Markdown (`code`, **bold**) as HTML: escaped, with those two marks rendered."""
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text, quote=False))
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def note(text: str) -> str:
    """A muted paragraph from a Markdown-written note."""
    return f'<p class="muted">{inline_markdown(text)}</p>'


def table_html(header: list[str], rows: list[str], numeric: set[int] | None = None, cls: str = "") -> str:
    """A scrollable table with a sticky header and first column; `rows` are ready `<tr>` HTML."""
    numeric = numeric or set()
    th = "".join(f'<th class="num">{h}</th>' if i in numeric else f"<th>{h}</th>" for i, h in enumerate(header))
    return f'<div class="table-wrap"><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def page(title: str, header: str, sections: list[tuple[str, str, str]], *, footer: str = "", data: str = "") -> str:
    """One self-contained report page: title, `header` HTML, a nav over the (id, title, HTML) sections,
    the sections, `footer` HTML and `data` (embedded JSON) with the legend script at the end."""
    nav = "".join(f'<a href="#{sid}">{name}</a>' for sid, name, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{name}</h2>{html}</section>' for sid, name, html in sections)
    foot = f"<footer>{footer}</footer>" if footer else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>retbench report: {escape(title)}</title>
<style>{CSS}{plots.LEGEND_CSS}</style>
</head>
<body>
<main>
<header>
<h1>{escape(title)}</h1>
{header}
<nav>{nav}</nav>
</header>
{body}
{foot}
</main>
{data}
<script>{plots.LEGEND_JS}</script>
</body>
</html>
"""


def text_table(header: list[str], rows: list[list[str]], left: set[int]) -> str:
    """A table of already formatted text cells (escaped here); columns not in `left` are numeric."""
    numeric = set(range(len(header))) - left
    body = [
        "<tr>"
        + "".join(
            f'<td class="num">{escape(c)}</td>' if i in numeric else f"<td>{escape(c)}</td>" for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    ]
    return table_html([escape(h) for h in header], body, numeric)
