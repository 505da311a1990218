"""Anything that weakens a number is said where the number is: a failed query, a query with no relevant document,
rankings shorter than the depth asked for and unjudged holes each get a line under the terminal table, beside the
summary in report.md and report.html, and beside the gate rows of the PR comment; a clean run gets none.

Real runs: a BEIR folder written here, users' own retrievers (`tests/plugins/toy_retrievers.py`: word overlap,
one that fails on a marked query, one capped at 3 documents) run through `retbench run` and `retbench gate`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import repo_paths
from retbench.results import read_results

runner = CliRunner()
DOCS = 12
DEPTH = 10
METRICS = ["ndcg@10", "recall@10", "ndcg@3"]
OVERLAP = {"name": "overlap", "adapter": "toy_retrievers:WordOverlap", "params": {"fail_on": ["zebra"]}}
FEWER = {"name": "fewer", "adapter": "toy_retrievers:ReturnsFewer", "params": {"returns": 3}}


@pytest.fixture(scope="module", autouse=True)
def _plugins_on_path() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(repo_paths.PLUGINS))
        yield


def write_dataset(folder: Path, queries: dict[str, str], qrels: list[tuple[str, str, int]]) -> Path:
    """A BEIR folder: every document and every query shares the word 'common', so word overlap ranks them all."""
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": "", "text": f"common w{i} filler"} for i in range(DOCS)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, d, g in qrels]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


def run_study(
    tmp_path: Path, data: Path, systems: list[dict], depth: int = DEPTH, metrics: list[str] = METRICS
) -> tuple[str, Path]:
    """`retbench run` printed at 200 columns: (its output, the results folder)."""
    cfg = {
        "name": "caveats",
        "output": str(tmp_path / "out"),
        "depth": depth,
        "batch_size": 1,  # a query that raises fails alone, not its whole batch
        "metrics": metrics,
        "datasets": [{"path": str(data), "split": "test"}],
        "systems": systems,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = runner.invoke(app(), ["run", str(path), "--no-history"], env={"COLUMNS": "200"})
    assert result.exit_code in (0, 3), result.output
    return result.output, tmp_path / "out"


def gate_comment(tmp_path: Path, out: Path, system: str) -> str:
    criteria = tmp_path / "criteria.yaml"
    criteria.write_text(yaml.safe_dump({"gates": [{"name": "recall", "metric": "recall@10", "threshold": 0.0}]}))
    comment = tmp_path / f"comment-{system}.md"
    args = ["gate", "--criteria", str(criteria), "--candidate", str(out), "--candidate-system", system]
    verdict = comment.with_suffix(".json")
    args += ["--comment", str(comment), "--json", str(verdict), "--history-file", str(tmp_path / "history.db")]
    result = runner.invoke(app(), args)
    assert result.exit_code in (0, 3), result.output
    said = [line.removeprefix("⚠️ ") for line in comment.read_text().splitlines() if line.startswith("⚠️ ")]
    assert json.loads(verdict.read_text())["caveats"] == said  # the JSON output holds the same lines
    return comment.read_text()


def app():
    from retbench.cli import app as cli

    return cli


def flat(text: str) -> str:
    """Printed text with the console's line breaks undone (a sentence may wrap at the console's width)."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def weakened(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, dict[str, str]]:
    """One study with every weakness: q3 fails for `overlap`, q4 has no relevant document, `fewer` returns 3 of
    10, and only the relevant document of each query is judged (judged@10 at most 10% for `overlap`)."""
    tmp = tmp_path_factory.mktemp("weakened")
    queries = {f"q{i}": f"common w{i}" for i in range(5)} | {"q3": "common w3 zebra"}
    qrels = [(f"q{i}", f"d{i}", 1) for i in range(4)] + [("q4", "d4", 0)]
    printed, out = run_study(tmp, write_dataset(tmp / "data", queries, qrels), [OVERLAP, FEWER])
    comments = {s: gate_comment(tmp, out, s) for s in ("overlap", "fewer")}
    return printed, out, comments


def expected(out: Path) -> dict[str, str]:
    """The facts each note must state, from what metrics.json stored."""
    res = read_results(out)
    fewer, overlap = res["fewer"].coverage, res["overlap"].coverage
    return {
        "failed": f"overlap: of {overlap['judged']} judged queries, 1 failed; it scores 0 in every mean",
        "skipped": "overlap: 1 query has no relevant document and is left out of every mean",
        "short": f"fewer: {fewer['short']} of {fewer['scored']} queries returned fewer than {DEPTH} documents (3)",
        "short_effect": "nDCG@10 and recall@10 look past rank 3 and count the missing ranks as not relevant",
        # one judged document in each answered top 10 (q0-q2, q4); the failed q3 has no top 10 to judge
        "holes": "overlap: only 10% of the top 10 documents of the answered queries are judged (below 90%)",
    }


def test_the_run_stores_the_lengths_of_its_short_rankings(weakened):
    _, out, _ = weakened
    cov = read_results(out)["fewer"].coverage
    assert (cov["short"], cov["short_min"], cov["short_max"], cov["depth"]) == (4, 3, 3, DEPTH)
    assert "short_min" not in read_results(out)["overlap"].coverage  # every answered query returned 10 or more


def test_every_weakness_is_said_under_the_terminal_table(weakened):
    printed, out, _ = weakened
    text = flat(printed)
    for key, words in expected(out).items():
        assert words in text, key
    assert "ndcg@3" not in text.split("fewer:", 1)[1].split(".", 1)[0]  # a cutoff the short rankings reach


def test_every_weakness_is_said_next_to_the_summary_in_report_md_and_report_html(weakened):
    _, out, _ = weakened
    md = (out / "report.md").read_text()
    summary = md.split("## Summary", 1)[1].split("## Incomplete judgements", 1)[0]
    html = flat((out / "report.html").read_text())
    facts = expected(out)
    for key in ("failed", "skipped", "short", "short_effect"):
        assert facts[key] in flat(summary), key
        assert facts[key] in html, key
    assert facts["holes"] in md and facts["holes"] in html  # the holes' own section follows the summary


def test_the_pr_comment_says_each_weakness_beside_the_gate_rows(weakened):
    _, out, comments = weakened
    facts = expected(out)
    assert "1 failed, counted as 0" in comments["overlap"]  # beside the candidate's coverage
    for key in ("skipped", "holes"):
        assert f"⚠️ {facts[key]}" in comments["overlap"], key
    assert facts["short"] in comments["fewer"]
    assert "recall@10 looks past rank 3" in flat(comments["fewer"])  # only the gated metric is named
    table_end = comments["fewer"].index("| ✅") if "| ✅" in comments["fewer"] else 0
    assert comments["fewer"].index("⚠️ fewer:") > table_end  # after the gate rows, not inside the table


def test_a_clean_run_gets_no_note_anywhere(tmp_path: Path):
    queries = {f"q{i}": f"common w{i}" for i in range(3)}
    qrels = [(q, f"d{j}", int(q == f"q{j}")) for q in queries for j in range(DOCS)]  # every document judged
    printed, out = run_study(tmp_path, write_dataset(tmp_path / "data", queries, qrels), [{**OVERLAP, "params": {}}])
    comment = gate_comment(tmp_path, out, "overlap")
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    for words in ("returned fewer than", "left out of every mean", "judged queries, ", "are judged", "⚠️", "> **Note**"):
        assert words not in flat(printed) and words not in md and words not in comment, words
    assert "data-caveat" not in html and "data-holes" not in html


def test_a_shallow_run_says_its_uncut_metrics_stand_on_its_real_depth(tmp_path: Path):
    queries = {f"q{i}": f"common w{i}" for i in range(4)}
    qrels = [(q, f"d{i}", 1) for i, q in enumerate(queries)]  # one judged document per query
    data = write_dataset(tmp_path / "data", queries, qrels)
    metrics = ["map", "ndcg", "bpref", "recall@5"]
    printed, out = run_study(tmp_path, data, [{**OVERLAP, "params": {}}], depth=5, metrics=metrics)
    said = (
        "depth 5: MAP, nDCG and bpref have no cutoff and were computed on the 5 documents retrieved per query; "
        "a deeper ranking (BEIR ranks 100, TREC 1,000) can score them differently."
    )
    md, html = (out / "report.md").read_text(), flat((out / "report.html").read_text())
    assert said in flat(printed) and said in flat(md) and said in html
    assert "recall@5 " not in said  # a cutoff within the depth needs no word
    holes = "overlap: only 20% of the top 5 documents (the whole ranking: depth 5) of the answered queries are judged"
    assert holes in flat(printed) and holes in flat(md)
    assert "top 10" not in flat(printed) + flat(md)
