"""Columnar run files: the same run whether read from TREC text, Arrow IPC or Parquet, everywhere a run file goes."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from retbench import api
from retbench.cli import app
from retbench.data import Qrels, Run
from retbench.evaluation import evaluate
from retbench.io.judgements import read_system
from retbench.io.run_columns import run_fingerprint, write_run_columns
from retbench.io.run_files import copy_path, read_beside, write_run_files
from retbench.io.trec import read_run, write_run
from retbench.results.files import load_run, save_run
from retbench.results.layout import SystemDir

METRICS = ["ndcg@10", "map", "mrr", "recall@100", "P@5"]


def _messy_run(n_q: int = 40, depth: int = 30, seed: int = 3) -> Run:
    """Ties, ids of 1-20 bytes (some longer than 8: hashed keys), non-ASCII ids, a query with no docs."""
    rng = np.random.default_rng(seed)
    results: dict[str, dict[str, float]] = {}
    for q in range(n_q):
        docs = {
            f"d{int(i)}" + ("-long-suffix" * (i % 3 == 0)) + ("é" * (i % 7 == 0)): 0.0
            for i in rng.integers(0, 500, depth).tolist()
        }
        results[f"q{q}"] = {d: float(rng.integers(0, 6)) / 2 for d in docs}  # half-steps: many ties
    results["q-empty"] = {}
    return Run.from_dict(results, name="messy run")


def _qrels(run: Run, seed: int = 4) -> Qrels:
    rng = np.random.default_rng(seed)
    return Qrels(
        {
            q: {d: int(rng.integers(0, 3)) for d in run.docs(q)[::4]} | {"unranked": 1}
            for q in run.query_ids
            if run.docs(q)
        }
    )


def _same_run(a: Run, b: Run) -> None:
    assert a.query_ids == b.query_ids
    assert np.array_equal(a.offsets, b.offsets)
    assert a.doc_ids.tolist() == b.doc_ids.tolist()
    assert np.array_equal(a.scores, b.scores)


@pytest.mark.parametrize("suffix", [".arrow", ".parquet"])
def test_a_columnar_copy_reads_back_as_its_trec_text_with_the_same_fingerprint(tmp_path, suffix):
    run = _messy_run()
    text = tmp_path / "run.trec"
    write_run(run, text)
    from_text = read_run(text)
    fingerprint = write_run_columns(from_text, tmp_path / f"run{suffix}")
    back = read_run(tmp_path / f"run{suffix}")
    _same_run(back, from_text)
    assert back.name == from_text.name == "messy_run"
    assert fingerprint == run_fingerprint(back) == run_fingerprint(from_text) == run_fingerprint(run)
    means = evaluate(back, _qrels(run), METRICS).means()
    assert means == evaluate(from_text, _qrels(run), METRICS).means()


def test_every_reader_takes_a_columnar_run_file_told_by_its_bytes_not_its_name(tmp_path):
    run = _messy_run()
    write_run(run, tmp_path / "run.trec")
    write_run_columns(read_run(tmp_path / "run.trec"), tmp_path / "odd-name.txt.arrow")
    (tmp_path / "odd-name.txt.arrow").rename(tmp_path / "odd-name.txt")  # an Arrow file whatever its name
    qrels = _qrels(run)
    from_text = api.evaluate(qrels, tmp_path / "run.trec", METRICS)
    from_columns = api.evaluate(qrels, tmp_path / "odd-name.txt", METRICS)
    assert from_columns.means() == from_text.means()
    _same_run(read_system(tmp_path / "odd-name.txt")[0], read_run(tmp_path / "run.trec"))


def test_a_copy_edited_by_other_tools_is_checked_in_full_though_it_keeps_the_metadata(tmp_path):
    run = Run.from_dict({"q1": {"a": 3.0, "b": 2.0}, "q2": {"c": 1.0}})
    write_run_columns(run, tmp_path / "run.arrow")
    table = pa.ipc.open_file(pa.memory_map(str(tmp_path / "run.arrow"))).read_all()
    joined = pa.concat_tables([table, table.slice(0, 1)])  # q1's first doc again, at the end
    assert joined.schema.metadata == table.schema.metadata
    with pa.OSFile(str(tmp_path / "joined.arrow"), "wb") as sink, pa.ipc.new_file(sink, joined.schema) as w:
        w.write_table(joined)
    back = read_run(tmp_path / "joined.arrow")
    assert back.n_duplicates == 1 and back.to_dict() == run.to_dict()


def test_saved_runs_get_a_columnar_copy_that_load_run_reads_until_the_text_is_newer(tmp_path):
    run = _messy_run()
    sysdir = SystemDir(tmp_path / "systems" / "bm25")
    save_run(run, sysdir)
    assert copy_path(sysdir.run).is_file() and copy_path(sysdir.run).read_bytes()[:6] == b"ARROW1"
    loaded = load_run(sysdir, name="bm25")
    copy_path(sysdir.run).rename(tmp_path / "aside.arrow")
    _same_run(loaded, load_run(sysdir, name="bm25"))  # as the text alone gives it
    assert loaded.status["q-empty"].value == "empty"  # (from status.jsonl, as before)
    (tmp_path / "aside.arrow").rename(copy_path(sysdir.run))
    text = sysdir.run.read_bytes()
    sysdir.run.write_text("q0 Q0 not-read 1 1.0 x\n")  # older than the copy (below): the copy is what is read
    stamp = copy_path(sysdir.run).stat().st_mtime_ns
    os.utime(sysdir.run, ns=(stamp - 10**9, stamp - 10**9))
    _same_run(load_run(sysdir, name="bm25"), loaded)
    sysdir.run.write_bytes(text)
    # someone edits run.trec by hand: the copy is older now, so the text is what is read
    sysdir.run.write_text("q1 Q0 only 1 1.0 edited\n")
    stamp = copy_path(sysdir.run).stat().st_mtime_ns
    os.utime(sysdir.run, ns=(stamp + 10**9, stamp + 10**9))
    assert read_beside(sysdir.run).to_dict() == {"q1": {"only": 1.0}}


def test_write_run_files_writes_the_text_for_trec_eval_and_the_copy_beside_it(tmp_path):
    run = _messy_run(n_q=3)
    (tmp_path / "runs").mkdir()
    copy = write_run_files(run, tmp_path / "runs" / "live.trec", tag="live")
    assert copy == tmp_path / "runs" / "live.arrow"
    text = read_run(tmp_path / "runs" / "live.trec")
    assert text.name == read_run(copy).name == "live"
    assert run_fingerprint(read_run(copy)) == run_fingerprint(text)


def test_runs_convert_goes_both_ways_and_prints_one_fingerprint(tmp_path):
    run = _messy_run(n_q=5)
    write_run(run, tmp_path / "run.trec")
    cli = CliRunner()
    to_columns = cli.invoke(app, ["runs", "convert", str(tmp_path / "run.trec"), str(tmp_path / "run.parquet")])
    assert to_columns.exit_code == 0, to_columns.output
    back = cli.invoke(app, ["runs", "convert", str(tmp_path / "run.parquet"), str(tmp_path / "back.trec")])
    assert back.exit_code == 0, back.output
    assert (tmp_path / "back.trec").read_bytes() == (tmp_path / "run.trec").read_bytes()
    fingerprint = to_columns.output.split("fingerprint ")[1].strip()
    assert back.output.split("fingerprint ")[1].strip() == fingerprint == run_fingerprint(run)
    listed = cli.invoke(app, ["runs", "fingerprint", str(tmp_path / "run.trec"), str(tmp_path / "run.parquet")])
    assert [line.split()[0] for line in listed.output.splitlines()] == [fingerprint, fingerprint]


def test_eval_scores_a_columnar_run_as_its_text(tmp_path):
    run = _messy_run(n_q=8)
    write_run(run, tmp_path / "run.trec")
    write_run_columns(run, tmp_path / "run.arrow")
    (tmp_path / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in _qrels(run).items() for d, g in docs.items())
    )
    outputs = [
        CliRunner().invoke(app, ["eval", str(tmp_path / "qrels.txt"), str(tmp_path / f), "-f", "trec", "-m", "map"])
        for f in ("run.trec", "run.arrow")
    ]
    assert all(o.exit_code == 0 for o in outputs), outputs[1].output
    assert outputs[0].output == outputs[1].output and "\tall\t0.3064" in outputs[0].output
