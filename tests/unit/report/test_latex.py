"""LaTeX tables for papers: well formed, best values bold, marks exactly where the corrected tests say so."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

import abdata
from retbench.cli import app
from retbench.comparison import compare
from retbench.report.latex import comparison_latex, latex_table, report_latex
from retbench.report.model import build_report
from retbench.results import read_results

ENV = re.compile(r"\\(begin|end)\{([^}]*)\}")
UNESCAPED = re.compile(r"(?<!\\)[&%$#_^~]")


def check_well_formed(tex: str) -> list[list[str]]:
    """Braces balance, environments nest, every row has the header's columns; the body rows' cells."""
    plain = re.sub(r"\\[{}&%$#_]", "", tex)
    depth = 0
    for c in plain:
        depth += (c == "{") - (c == "}")
        assert depth >= 0, "a } closes nothing"
    assert depth == 0, "an unclosed {"
    stack: list[str] = []
    for kind, name in ENV.findall(tex):
        if kind == "begin":
            stack.append(name)
        else:
            assert stack and stack.pop() == name, f"\\end{{{name}}} does not close the open environment"
    assert stack == []
    body = tex.split("\\midrule\n")[1].split("\\bottomrule")[0]
    rows = [re.split(r"(?<!\\)&", line.removesuffix(" \\\\").strip()) for line in body.strip().splitlines()]
    header = tex.split("\\toprule\n")[1].split("\n")[0]
    width = len(re.split(r"(?<!\\)&", header))
    assert all(len(r) == width for r in rows)
    assert re.search(r"\\begin\{tabular\}\{cl(r*)\}", tex).group(1) == "r" * (width - 2)
    return [[c.strip() for c in r] for r in rows]


def expected_marks(cmp, letters: dict[str, str]) -> dict[tuple[str, str], str]:
    """From the comparison itself: B beats A where the Holm-corrected randomization p <= alpha and B - A > 0."""
    out: dict[tuple[str, str], list[str]] = {}
    for pair in cmp.pairs:
        for m in pair.metrics:
            p = m.adjusted["randomization"]
            if p <= cmp.alpha and m.delta != 0:
                win, lose = (pair.system_b, pair.system_a) if m.delta > 0 else (pair.system_a, pair.system_b)
                out.setdefault((win, m.metric), []).append(letters[lose])
    return {k: "".join(sorted(v)) for k, v in out.items()}


def cell_parts(cell: str) -> tuple[str, bool, str]:
    """(the printed value, bold?, the superscript letters) of one cell."""
    m = re.fullmatch(r"(\\textbf\{)?([0-9.]+)\}?(?:\$\^\{([a-z0-9]*)\}\$)?", cell)
    assert m, cell
    return m.group(2), m.group(1) is not None, m.group(3) or ""


def check_table(tex: str, systems: list[str], means: dict, metrics: list[str], cmp) -> int:
    """Every number, bold and mark as the inputs say; returns how many marks the table carries."""
    rows = check_well_formed(tex)
    letters = {s: chr(ord("a") + i) for i, s in enumerate(systems)}
    marks = expected_marks(cmp, letters)
    assert [r[0] for r in rows] == list(letters.values())
    seen = 0
    for row, s in zip(rows, systems, strict=True):
        for cell, metric in zip(row[2:], metrics, strict=True):
            value, bold, sup = cell_parts(cell)
            assert value == f"{means[s][metric]:.4f}"
            best = max(round(means[o][metric], 4) for o in systems)
            assert bold == (round(means[s][metric], 4) == best)
            assert sup == marks.get((s, metric), "")
            seen += len(sup)
    return seen


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return abdata.scifact_results(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def data(results_dir):
    return build_report(read_results(results_dir), n_resamples=2000)


def test_report_table_marks_exactly_the_significant_wins_over_the_baseline(data):
    tex = report_latex(data)
    systems = [s.name for s in data.systems]
    means = {s.name: s.means for s in data.systems}
    check_table(tex, systems, means, data.metrics, data.comparison)
    assert "Holm-corrected" in tex and "$\\alpha = 0.05$" in tex and "2,000 resamples" in tex
    assert f"the baseline ({data.baseline})" in tex


def test_all_pairs_table_marks_every_pair_both_ways(results_dir, tmp_path):
    evs = list(abdata.evaluations(tmp_path.parent).values())
    cmp = compare(evs, None, ["recall@5", "ndcg@10"], n_resamples=2000)
    tex = comparison_latex(cmp)
    systems = [e.system for e in evs]
    means = {e.system: dict(zip(e.metrics, e.values.mean(axis=0).tolist(), strict=True)) for e in evs}
    for pair in cmp.pairs:  # the comparison's means are the evaluations' (same queries, same order)
        assert pair.metric("recall@5").mean_a == pytest.approx(means[pair.system_a]["recall@5"])
    marks = check_table(tex, systems, means, cmp.metrics, cmp)
    assert marks > 0 and "each pair of systems" in tex


def test_user_text_is_escaped_so_the_table_still_parses():
    name = "bm25_k1=0.9 & 50% {#1} ~x^2 $\\o/"
    tex = latex_table([name, "plain"], {name: {"P@5": 0.5}, "plain": {"P@5": 0.25}}, ["P@5"], what="a_b & c")
    rows = check_well_formed(tex)
    assert rows[0][1] == r"bm25\_k1=0.9 \& 50\% \{\#1\} \textasciitilde{}x\textasciicircum{}2 \$\textbackslash{}o/"
    assert not UNESCAPED.search(rows[0][1].replace("\\&", "").replace("\\%", "").replace("\\_", ""))
    assert rows[0][2] == r"\textbf{0.5000}" and rows[1][2] == "0.2500"
    assert "a\\_b \\& c. Best value" in tex and "No significance test" in tex


def test_cli_report_and_compare_print_and_write_latex(results_dir, tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["report", str(results_dir), "--format", "latex", "--resamples", "500"])
    assert out.exit_code == 0, out.output
    check_well_formed(out.stdout)
    path = tmp_path / "t.tex"
    out = runner.invoke(app, ["compare", str(results_dir), "--all-pairs", "--latex", str(path), "--resamples", "500"])
    assert out.exit_code == 0, out.output
    assert "## " in out.stdout or "|" in out.stdout  # Markdown still printed
    assert "each pair of systems" in check_and_read(path)
    bad = runner.invoke(app, ["report", str(results_dir), "--format", "xml"])
    assert bad.exit_code == 2 and "--format must be markdown or latex" in bad.output


def check_and_read(path) -> str:
    tex = path.read_text()
    check_well_formed(tex)
    return tex
