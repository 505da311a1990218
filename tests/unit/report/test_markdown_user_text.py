"""report.md writes user text (system, dataset and experiment names, query texts) as text: no Markdown of its own.

The rendered check uses markdown-it-py (CommonMark with GFM tables), the parser MkDocs' ecosystem and many
viewers share: a hostile name renders as exactly its characters, in one table cell.
"""

from __future__ import annotations

import dataclasses
import re
from html import unescape

import pytest

from retbench.report.markdown import md_table, md_text, report_markdown

HOSTILE = ["**bold** _it_ `tick` [link](javascript:x) ~~gone~~ a|b \\ <!--<script>", "``", "_x_", "bm25_weak"]


def _render(md: str) -> str:
    mdit = pytest.importorskip("markdown_it")
    return mdit.MarkdownIt("commonmark").enable("table").enable("strikethrough").render(md)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_renders_as_its_own_characters_in_one_table_cell(name):
    html = _render(md_table(["system", "score"], [[name, "0.5"]]))
    cells = re.findall(r"<td>(.*?)</td>", html, flags=re.S)
    assert len(cells) == 2 and unescape(cells[0]) == name and cells[1] == "0.5"
    assert not re.search(r"<(strong|em|code|a|del|script)\b", html)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_text_outside_a_table_renders_as_its_own_characters(name):
    html = _render(f"# {md_text(name)}\n\nrun by {md_text(name)}.\n")
    assert unescape(re.search(r"<h1>(.*?)</h1>", html).group(1)) == name
    assert not re.search(r"<(strong|em|code|a|del|script)\b", html)


def test_words_with_underscores_and_intervals_are_written_as_typed():
    assert md_text("bm25_weak chars_200 [0.1000, 0.3000]") == "bm25_weak chars_200 [0.1000, 0.3000]"


def test_the_results_report_escapes_system_names_in_headers_and_cells(scifact_report):
    name = "**x** | `y` [z](javascript:alert(1))"
    data = dataclasses.replace(
        scifact_report,
        systems=[dataclasses.replace(s, name=name if i == 0 else s.name) for i, s in enumerate(scifact_report.systems)],
    )
    html = _render(report_markdown(data))
    assert not re.search(r"<(strong|a)\b[^>]*>(x|z)", html) and 'href="javascript' not in html
    assert name in {unescape(c) for c in re.findall(r"<td>(.*?)</td>", html)}
