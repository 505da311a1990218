"""`retbench eval` never prints "nan": empty judgements are refused naming the file, and a mean over no query
reads "n/a (no query scored)" with no interval beside it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retbench.cli import app
from retbench.report import fmt

runner = CliRunner()


@pytest.mark.parametrize(("name", "text"), [("empty.qrels", ""), ("qrels.tsv", "query-id\tcorpus-id\tscore\n")])
def test_eval_on_empty_judgements_is_one_line_naming_the_file_and_exit_2(tmp_path: Path, name: str, text: str):
    (tmp_path / name).write_text(text)
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 1.0 r\n")
    res = runner.invoke(app, ["eval", str(tmp_path / name), str(tmp_path / "run.trec")])
    out = res.output.strip()
    assert res.exit_code == 2, out
    assert out == f"error: {tmp_path / name}: holds no judgements: nothing to score the run against"


def test_a_mean_over_no_query_reads_n_a_with_no_interval(tmp_path: Path):
    (tmp_path / "zero.qrels").write_text("q1 0 d1 0\n")  # judged, but nothing relevant: skipped by default
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 1.0 r\n")
    res = runner.invoke(app, ["eval", str(tmp_path / "zero.qrels"), str(tmp_path / "run.trec"), "-m", "ndcg@10"])
    assert res.exit_code == 0, res.output
    assert "n/a (no query scored)" in res.output and not re.search(r"\bnan\b", res.output, re.IGNORECASE)


def test_a_missing_mean_never_carries_an_interval():
    assert fmt.mean_ci(math.nan, (0.6285, 1.0)) == fmt.NO_SCORE
    assert fmt.mean_ci(None, (0.6285, 1.0)) == fmt.NO_SCORE
    assert fmt.mean_ci(0.8, (0.6285, 1.0)) == "0.8000 [0.6285, 1.0000]"
    assert fmt.mean_ci(0.8, (math.nan, 1.0)) == "0.8000"
