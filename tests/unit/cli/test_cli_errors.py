"""Every input-caused failure of every command: one line naming the path or field, exit 2, no traceback.

Each case below damages a real input (a config, qrels, run file, or a results directory written by
`retbench run`) the way a person or a crash does, then runs the real CLI on it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repo_paths import V1_RESULTS
from retbench.cli import app

SMALL = """\
name: small
metrics: [ndcg@10]
batch_size: 2
datasets: [{name: scifact, split: test, max_queries: 6, corpus_sample: 200}]
systems:
  - {name: bm25, adapter: bm25s}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A real results directory (BM25 over a small SciFact slice), copied before each case damages it."""
    root = tmp_path_factory.mktemp("cli-errors")
    (root / "small.yaml").write_text(SMALL)
    res = CliRunner().invoke(app, ["run", str(root / "small.yaml"), "-o", str(root / "res"), "--quiet"])
    assert res.exit_code == 0, res.output
    return root / "res"


def _write(rel: str, data: str | bytes) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())

    return go


def _append(rel: str, line: str) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        with open(d / rel, "a") as fh:
            fh.write(line + "\n")

    return go


def _replace_with_dir(rel: str) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        (d / rel).unlink()
        (d / rel).mkdir()

    return go


def _journal_line(n: int, text: str) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        (d / "systems/bm25/done.json").unlink()
        j = d / "systems/bm25/journal.jsonl"
        lines = j.read_text().splitlines()
        lines[n - 1] = text
        j.write_text("\n".join(lines) + "\n")

    return go


def _nothing(d: Path) -> None:
    pass


def _set_mean(d: Path, value: object) -> None:
    """metrics.json with bm25's ndcg@10 value replaced (NaN and Infinity written as Python's json writes them)."""
    mj = json.loads((d / "metrics.json").read_text())
    mj["systems"]["bm25"]["metrics"]["ndcg@10"]["value"] = value
    (d / "metrics.json").write_text(json.dumps(mj))


def _set_v1_mean(d: Path, value: object) -> None:
    """A results folder of the earlier layout (no schema_version, means beside blocks) with one mean replaced."""
    shutil.rmtree(d)
    shutil.copytree(V1_RESULTS, d)
    (d / "extra").mkdir()
    mj = json.loads((d / "metrics.json").read_text())
    mj["bm25"]["ndcg@10"] = value
    (d / "metrics.json").write_text(json.dumps(mj))


QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d1 1\n"
RUN = "1 Q0 d1 1 2.0 t\n1 Q0 d2 2 1.0 t\n2 Q0 d1 1 1.0 t\n"
BAD_SHAPE = '{"key":"q","qid":"q","status":"ok","docs":"abc","scores":5}'

# (case id, damage to the copied results dir D, CLI args with {D}, {X} = D/extra and {C} = the config, words
# the one line holds)
CASES = [
    ("config is a directory", _nothing, ["run", "{D}"], "not a regular file"),
    ("config not UTF-8", _write("extra/c.yaml", b"name: \xff\xfe\n"), ["run", "{X}/c.yaml"], "not UTF-8"),
    ("stress config is a directory", _nothing, ["stress", "{D}"], "not a regular file"),
    ("chunking config is a directory", _nothing, ["chunking", "{D}"], "not a regular file"),
    ("ingest config missing", _nothing, ["ingest-impact", "{X}/none.yaml"], "not found"),
    (
        "criteria not UTF-8",
        _write("extra/c.yaml", b"gates: \xff\n"),
        ["gate", "--criteria", "{X}/c.yaml", "--candidate", "{D}"],
        "not UTF-8",
    ),
    ("criteria is a directory", _nothing, ["gate", "--criteria", "{D}", "--candidate", "{D}"], "criteria file"),
    (
        "output path is a file",
        _write("extra/c.yaml", SMALL),
        ["run", "{X}/c.yaml", "-o", "{D}/metrics.json"],
        "not a directory",
    ),
    ("html output is a directory", _nothing, ["report", "{D}", "--html", "{D}"], "is a directory"),
    ("html output under a file", _nothing, ["report", "{D}", "--html", "{D}/metrics.json/r.html"], "metrics.json"),
    (
        "cutoff of 2^63",
        _write("extra/q.txt", QRELS),
        ["eval", "{X}/q.txt", "{D}/systems/bm25/run.trec", "-m", "ndcg@9223372036854775808"],
        "at most 2147483647",
    ),
    (
        "default k of 2^63",
        _write("extra/q.txt", QRELS),
        ["eval", "{X}/q.txt", "{D}/systems/bm25/run.trec", "-m", "recall", "--default-k", "9223372036854775808"],
        "at most 2147483647",
    ),
    (
        "metric parameter out of range",
        _write("extra/q.txt", QRELS),
        ["eval", "{X}/q.txt", "{D}/systems/bm25/run.trec", "-m", "hybrid@5(alpha=7)"],
        "alpha must be in [0, 1]",
    ),
    ("qrels not UTF-8", _write("extra/q.txt", b"1 0 d1 \xff\n"), ["eval", "{X}/q.txt", "{X}/q.txt"], "UTF-8"),
    (
        "run not UTF-8",
        _write("extra/q.txt", QRELS),
        ["eval", "{X}/q.txt", "{D}/systems/bm25/per_query.tsv"],
        "per_query.tsv",
    ),
    ("run file is a directory", _write("extra/q.txt", QRELS), ["eval", "{X}/q.txt", "{X}"], "not a regular file"),
    ("metrics.json garbage", _write("metrics.json", "nope{"), ["report", "{D}"], "metrics.json:1: malformed JSON"),
    ("metrics.json a list", _write("metrics.json", "[1, 2]"), ["report", "{D}"], "metrics.json"),
    (
        "metrics.json values not objects",
        _write("metrics.json", '{"bm25": 5}'),
        ["compare", "{D}", "{D}"],
        "metrics.json",
    ),
    ("manifest a list", _write("manifest.json", "[]"), ["report", "{D}"], "manifest.json"),
    ("manifest garbage", _write("manifest.json", "x"), ["compare", "{D}", "{D}"], "manifest.json:1"),
    (
        "per_query.tsv missing",
        lambda d: (d / "systems/bm25/per_query.tsv").unlink(),
        ["report", "{D}"],
        "per_query.tsv",
    ),
    ("per_query.tsv garbage", _write("systems/bm25/per_query.tsv", "garbage\n"), ["report", "{D}"], "per_query.tsv:1"),
    ("per_query.tsv a directory", _replace_with_dir("systems/bm25/per_query.tsv"), ["report", "{D}"], "is a directory"),
    ("status.jsonl garbage line", _append("systems/bm25/status.jsonl", "x"), ["report", "{D}"], "status.jsonl:7"),
    (
        "status.jsonl wrong qid type",
        _append("systems/bm25/status.jsonl", '{"qid": 5, "status": "ok"}'),
        ["report", "{D}"],
        "field 'qid'",
    ),
    (
        "status.jsonl unknown status",
        _append("systems/bm25/status.jsonl", '{"qid": "5", "status": "weird"}'),
        ["report", "{D}"],
        "unknown status",
    ),
    ("status.jsonl a list line", _append("systems/bm25/status.jsonl", "[1]"), ["report", "{D}"], "status.jsonl:7"),
    ("run.trec short line", _append("systems/bm25/run.trec", "a b c"), ["report", "{D}"], "expected 6 columns"),
    (
        "systems is a file",
        lambda d: (shutil.rmtree(d / "systems"), (d / "systems").touch()),
        ["report", "{D}"],
        "systems",
    ),
    (
        "journal record of the wrong shape",
        _journal_line(3, BAD_SHAPE),
        ["run", "{C}", "-o", "{D}", "--quiet"],
        "--repair",
    ),
    ("journal line not JSON", _journal_line(3, "xx"), ["run", "{C}", "-o", "{D}", "--quiet"], "--repair"),
    (
        "done.json a directory",
        _replace_with_dir("systems/bm25/done.json"),
        ["run", "{C}", "-o", "{D}", "--quiet"],
        "done.json",
    ),
    ("results dir missing", _nothing, ["report", "{X}/none"], "not found"),
    ("dataset info on a file", _nothing, ["datasets", "info", "{D}/metrics.json"], "not found"),
    ("serve on a missing dataset", _nothing, ["serve", "{X}/none", "--port", "0"], "no dataset"),
    ("serve with a zero backlog", _nothing, ["serve", "scifact", "--backlog", "0"], "--backlog"),
    (
        "qrels grade beyond 64 bits",
        _write("extra/q.tsv", "query-id\tcorpus-id\tscore\n1\td1\t99999999999999999999999\n"),
        ["eval", "{X}/q.tsv", "{D}/systems/bm25/run.trec"],
        "q.tsv:2: field 'score': grade out of range (grades must fit in 64 bits)",
    ),
    (
        "golden set gain NaN",
        _write("extra/g.jsonl", '{"id": "a", "input": "hi", "expected_output": {"d1": NaN}}\n'),
        ["eval", "{X}/g.jsonl", "{D}/systems/bm25/run.trec"],
        "g.jsonl:1: field 'expected_output': gain for 'd1' must be an integer, got nan",
    ),
    (
        "metrics.json infinite value",
        lambda d: _set_mean(d, float("inf")),
        ["report", "{D}", "--html", "{X}/r.html"],
        "field 'systems.bm25.metrics.ndcg@10': value must be a number or null, got inf",
    ),
    (
        "metrics.json text value",
        lambda d: _set_mean(d, "high"),
        ["report", "{D}", "--html", "{X}/r.html"],
        "field 'systems.bm25.metrics.ndcg@10': value must be a number or null, got 'high'",
    ),
    (
        "metrics.json of the earlier layout with an infinite mean",
        lambda d: _set_v1_mean(d, float("inf")),
        ["report", "{D}", "--html", "{X}/r.html"],
        "field 'bm25.ndcg@10': mean must be a number or null, got inf",
    ),
    (
        "schema_version newer than this retbench",
        _write("metrics.json", '{"schema_version": 99, "systems": {}}'),
        ["report", "{D}"],
        "newer than this retbench reads",
    ),
]


@pytest.mark.parametrize("damage, args, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_input_caused_failure_is_one_line_naming_the_path_or_field_with_exit_2(
    results, tmp_path, damage, args, words
):
    d = tmp_path / "res"
    shutil.copytree(results, d)
    (d / "extra").mkdir()
    damage(d)
    filled = [a.format(D=d, X=d / "extra", C=results.parent / "small.yaml") for a in args]
    res = CliRunner().invoke(app, filled)
    out = res.output.strip()
    assert ("Traceback" not in out and res.exception is None) or isinstance(res.exception, SystemExit), out
    assert res.exit_code == 2, out
    assert len(out.splitlines()) == 1 and out.startswith("error: "), out
    assert words in out


def test_repair_sets_the_bad_journal_tail_aside_and_redoes_those_queries(results, tmp_path):
    d = tmp_path / "res"
    shutil.copytree(results, d)
    _journal_line(3, BAD_SHAPE)(d)
    journal = d / "systems/bm25/journal.jsonl"
    kept = journal.read_text().splitlines()[:2]
    cfg = str(results.parent / "small.yaml")
    assert CliRunner().invoke(app, ["run", cfg, "-o", str(d), "--quiet"]).exit_code == 2
    res = CliRunner().invoke(app, ["run", cfg, "-o", str(d), "--quiet", "--repair"])
    assert res.exit_code == 0, res.output
    assert "set aside in journal.jsonl.dropped" in res.output
    assert BAD_SHAPE in (d / "systems/bm25/journal.jsonl.dropped").read_text()
    assert journal.read_text().splitlines()[:2] == kept
    from retbench.results.usage import scores_only

    again, first = (json.loads((p / "metrics.json").read_text()) for p in (d, results))
    assert scores_only(again) == scores_only(first)
    assert (d / "systems/bm25/run.trec").read_text() == (results / "systems/bm25/run.trec").read_text()


@pytest.mark.parametrize("mean", [None, float("nan")], ids=["null", "NaN"])
def test_report_html_shows_a_null_or_nan_mean_as_no_value(results, tmp_path, mean):
    d = tmp_path / "res"
    shutil.copytree(results, d)
    _set_mean(d, mean)
    res = CliRunner().invoke(
        app, ["report", str(d), "--html", str(tmp_path / "r.html"), "--markdown", str(tmp_path / "r.md")]
    )
    assert res.exit_code == 0, res.output
    page = (tmp_path / "r.html").read_text()
    blob = page.split('<script type="application/json" id="retbench-data">', 1)[1].split("</script>", 1)[0]
    stored = json.loads(blob)["metrics"]["systems"]["bm25"]["metrics"]["ndcg@10"]
    assert stored["value"] is None  # strict JSON: no NaN in the page


@pytest.mark.parametrize("damage", ["qid", "score"])
def test_a_damaged_journal_record_is_asked_again_and_named_so_every_query_is_answered(
    results, tmp_path, caplog, damage
):
    d = tmp_path / "res"
    shutil.copytree(results, d)
    journal = d / "systems/bm25/journal.jsonl"
    lines = journal.read_text().splitlines()
    rec = json.loads(lines[2])
    if damage == "qid":
        del rec["qid"]
    else:
        rec["scores"][0] = float("nan")
    lines[2] = json.dumps(rec)
    journal.write_text("\n".join(lines) + "\n")
    (d / "systems/bm25/done.json").unlink()
    with caplog.at_level("WARNING", logger="retbench.journal"):  # the console shows it on stderr
        res = CliRunner().invoke(app, ["run", str(results.parent / "small.yaml"), "-o", str(d), "--quiet"])
    assert res.exit_code == 0, res.output
    assert f"{journal}:3: damaged journal record" in caplog.text
    assert (d / "systems/bm25/run.trec").read_text() == (results / "systems/bm25/run.trec").read_text()
