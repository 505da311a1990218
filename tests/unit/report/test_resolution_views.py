"""Three or more systems on one dataset: the report and `retbench compare` show each rank interval and the
group tied for first, equal to `rank_intervals` on the same per-query tables."""

from __future__ import annotations

import re

import numpy as np
import pytest
from typer.testing import CliRunner

import abdata
from retbench.cli import app
from retbench.report.html import render_html
from retbench.report.markdown import report_markdown
from retbench.report.model import build_report
from retbench.resolution import RankResolution, rank_intervals
from retbench.results import read_results

runner = CliRunner()


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return abdata.scifact_results(tmp_path_factory.getbasetemp())


def expected(results_dir, metric: str) -> RankResolution:
    """rank_intervals on the stored per-query tables (every system answered the same 300 queries)."""
    res = read_results(results_dir)
    evs = [res.evaluation(s) for s in res.systems]
    assert all(ev.query_ids == evs[0].query_ids for ev in evs) and len(evs) == 3
    table = np.column_stack([ev.column(metric) for ev in evs])
    return rank_intervals(table, list(res.systems), n_resamples=2000, seed=0)


def label(res: RankResolution, name: str) -> str:
    return res.interval(name) + (" (tied 1st)" if len(res.tied_first) > 1 and name in res.tied_first else "")


def test_the_report_ranks_three_systems_with_their_intervals_and_marks_those_tied_for_first(results_dir):
    data = build_report(read_results(results_dir), n_resamples=500)
    want = expected(results_dir, data.primary)
    got = data.resolution
    assert (got.names, got.rank, got.low, got.high, got.p_first) == (
        want.names,
        want.rank,
        want.low,
        want.high,
        want.p_first,
    )
    md = report_markdown(data)
    section = md.split("## Rank resolution:", 1)[1].split("\n## ", 1)[0]
    for name in want.names:
        assert re.search(rf"^\| {name} \| .* \| {re.escape(label(want, name))} \| ", section, flags=re.M)
    html = render_html(data)
    assert 'id="resolution"' in html
    for name in want.names:
        klass = "num tied-first" if name in want.tied_first else "num"
        assert f'<td class="{klass}" data-interval="{want.interval(name)}">' in html


def test_compare_with_three_systems_prints_the_rank_resolution(results_dir):
    result = runner.invoke(app, ["compare", str(results_dir), "--resamples", "200"])
    assert result.exit_code == 0, result.output
    metric = re.search(r"^## Rank resolution: (\S+)$", result.output, flags=re.M).group(1)
    want = expected(results_dir, metric)
    for name in want.names:
        assert re.search(rf"^\| {name} \| .* \| {re.escape(label(want, name))} \| ", result.output, flags=re.M)
    tied = want.tied_first
    assert (
        f"Tied for first: {', '.join(tied)}" if len(tied) > 1 else f"Only {tied[0]} reaches rank 1"
    ) in result.output


def test_two_systems_get_no_rank_resolution_their_paired_comparison_settles_them(results_dir):
    res = read_results(results_dir)
    first_two = ",".join(list(res.systems)[:2])
    result = runner.invoke(app, ["compare", str(results_dir), "--systems", first_two, "--resamples", "200"])
    assert result.exit_code == 0, result.output
    assert "Rank resolution" not in result.output


@pytest.fixture(scope="module")
def holes_evs(results_dir):
    """holes@10 on three real SciFact rankings: the same documents with the judged ones first, as retrieved, and
    with the unjudged ones first."""
    from retbench.data import Run
    from retbench.evaluation import evaluate
    from retbench.io.beir import read_qrels_tsv

    qrels, _ = read_qrels_tsv(abdata.SCIFACT / "qrels" / "test.tsv")
    run = read_results(results_dir).run("bm25")
    qids = [q for q in run.query_ids if q in qrels]

    def moved(judged_bonus: float) -> Run:
        return Run.from_dict(
            {q: {d: s + (judged_bonus if d in qrels[q] else 0.0) for d, s in run.ranking(q)} for q in qids}
        )

    evs = []
    for name, r in {"judged_first": moved(1e3), "as_retrieved": run, "unjudged_first": moved(-1e3)}.items():
        ev = evaluate(r, qrels.subset(qids), ["holes@10"])
        ev.system = name
        evs.append(ev)
    return evs


def test_a_lower_is_better_metric_ranks_its_smallest_mean_first(holes_evs):
    """The fewest holes is the best; the resolution must not crown the most."""
    from retbench.report.resolution import resolution_markdown
    from retbench.resolution import resolve

    means = {ev.system: float(np.mean(ev.column("holes@10"))) for ev in holes_evs}  # plain arithmetic
    assert means["judged_first"] < means["as_retrieved"] < means["unjudged_first"]
    res = resolve(holes_evs, "holes@10")
    assert res is not None
    assert res.rank == [1, 2, 3] and res.tied_first == ["judged_first"] and res.p_first[2] == 0.0
    assert "Only judged_first reaches rank 1" in "\n".join(resolution_markdown(res, "holes@10"))


def test_a_comparison_on_a_lower_is_better_metric_counts_a_fall_as_a_win(holes_evs):
    from retbench.comparison import compare_pair
    from retbench.report.histogram import delta_bins

    judged_first, as_retrieved = holes_evs[0], holes_evs[1]
    m = compare_pair(as_retrieved, judged_first, ["holes@10"], n_resamples=200).metrics[0]
    d = judged_first.column("holes@10") - as_retrieved.column("holes@10")  # B - A, plain arithmetic
    assert (m.wins, m.losses) == (int((d < -1e-9).sum()), int((d > 1e-9).sum())) and m.wins > 0
    assert all(c.delta < 0 for c in m.top_changes)  # the biggest gains are the biggest falls; there are no losses
    bins = delta_bins(d.tolist(), lower=True)
    assert sum(b.count for b in bins if b.kind == "better") == m.wins


def test_a_system_alone_at_rank_one_is_not_marked_tied_and_a_shared_first_place_is():
    """'1 (tied 1st)' beside the only system that reaches rank 1 read as a tie nobody shares."""
    from retbench.report.resolution import interval_cell

    rng = np.random.default_rng(3)
    base = rng.random(200)
    apart = rank_intervals(np.column_stack([base + 0.5, base, base - 0.5]), ["a", "b", "c"], n_resamples=500)
    assert apart.tied_first == ["a"] and interval_cell(apart, "a") == "1"
    close = rank_intervals(np.column_stack([base + 1e-3 * rng.standard_normal(200), base, base - 0.5]), ["a", "b", "c"], n_resamples=500)  # fmt: skip
    assert len(close.tied_first) == 2
    assert {interval_cell(close, n) for n in close.tied_first} <= {"1-2 (tied 1st)", "1 (tied 1st)"}
    assert interval_cell(close, "c") == "3"
