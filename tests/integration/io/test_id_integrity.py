"""Every file retbench writes can be read back by retbench and by trec_eval.

Ids with whitespace, control characters, empty, null, boolean or container ids, and NaN or infinite
scores are stopped where they enter: when data is loaded (an error naming file, line and field) and
when a backend answers (status `invalid`, with the reason recorded). Run files with more than six
columns are read the way trec_eval reads them: the first six fields, the rest of the line ignored.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from repo_paths import PLUGINS, SRC, SUPPORT
from retbench.data import QueryStatus, RunBuilder
from retbench.errors import InputError
from retbench.io.beir import read_beir, write_beir
from retbench.io.outputs import read_outputs
from retbench.io.trec import read_run, write_run
from stress_support import scifact_slice


@pytest.fixture(scope="module")
def folder(scifact, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("beir") / "slice"
    write_beir(scifact_slice(scifact, n_queries=12, n_other_docs=30), out)
    return out


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(folder, tmp_path / "copy"))


def _rewrite_line(path: Path, lineno: int, edit) -> None:
    lines = path.read_text().splitlines()
    lines[lineno - 1] = edit(lines[lineno - 1])
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "bad_id",
    ["doc 1", "doc\t1", "doc\n1", "doc\r1", "doc\u00a01", "", None, True, {"a": 1}, [1]],
    ids=["space", "tab", "newline", "cr", "nbsp", "empty", "null", "bool", "dict", "list"],
)
def test_a_bad_document_id_is_an_error_naming_file_line_and_field(folder, tmp_path, bad_id):
    root = _copy(folder, tmp_path)
    corpus = root / "corpus.jsonl"
    _rewrite_line(corpus, 3, lambda line: json.dumps({**json.loads(line), "_id": bad_id}))
    with pytest.raises(InputError) as err:
        read_beir(root)
    assert "corpus.jsonl:3: field '_id'" in str(err.value)


def test_bad_query_ids_and_qrels_ids_are_errors_naming_the_line(folder, tmp_path):
    root = _copy(folder, tmp_path)
    _rewrite_line(root / "queries.jsonl", 2, lambda line: json.dumps({**json.loads(line), "_id": "q\t2"}))
    with pytest.raises(InputError, match=r"queries.jsonl:2: field '_id'.*whitespace"):
        read_beir(root)
    root = _copy(folder, tmp_path / "b")
    _rewrite_line(root / "qrels" / "test.tsv", 2, lambda line: line.replace("\t", "\tdoc ", 1))
    with pytest.raises(InputError, match=r"test.tsv:2: field 'corpus-id'"):
        read_beir(root)


@pytest.mark.parametrize(
    "item, field",
    [
        ({"id": None}, "retrieved.id"),
        ({"id": True}, "retrieved.id"),
        ({"id": {"x": 1}}, "retrieved.id"),
        ({"id": "a b"}, "retrieved.id"),
        ({"id": "a", "score": "high"}, "retrieved.score"),
        ({"id": "a", "score": float("nan")}, "retrieved.score"),
        ("a\nb", "retrieved"),
        (False, "retrieved"),
    ],
)
def test_an_outputs_file_with_a_bad_id_or_score_names_the_line(tmp_path, item, field):
    path = tmp_path / "outputs.jsonl"
    good = {"id": "q1", "retrieved": [{"id": "d1", "score": 1.0}]}
    path.write_text(json.dumps(good) + "\n" + json.dumps({"id": "q2", "retrieved": ["d1", item]}) + "\n")
    with pytest.raises(InputError) as err:
        read_outputs(path)
    assert f"outputs.jsonl:2: field '{field}'" in str(err.value)
    path.write_text(json.dumps({"id": None, "retrieved": ["d1"]}) + "\n")
    with pytest.raises(InputError, match=r"outputs.jsonl:1: field .id."):
        read_outputs(path)


def test_retbench_run_records_bad_backend_answers_as_invalid_and_its_files_read_back(folder, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    from toy_retrievers import BAD_ITEMS

    cfg = {
        "name": "ids",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": str(folder), "split": "test"}],
        "systems": [{"name": "careless\tbackend v2", "adapter": "toy_retrievers:BadAnswers"}],
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(SUPPORT), str(PLUGINS)])}
    run = [sys.executable, "-m", "retbench.cli", "run", str(tmp_path / "cfg.yaml"), "--quiet"]
    proc = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and "a name cannot" in proc.stderr and "systems[0].name" in proc.stderr
    assert "Traceback" not in proc.stderr

    cfg["systems"][0]["name"] = "careless backend v2"  # a space is fine in a name; the run tag gets '_'
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 3, proc.stderr  # invalid answers are backend failures
    sysdir = tmp_path / "out" / "systems" / "careless backend v2"
    status = [json.loads(line) for line in (sysdir / "status.jsonl").read_text().splitlines()]
    invalid = [s for s in status if s["status"] == QueryStatus.INVALID.value]
    assert len(invalid) == len(BAD_ITEMS) and len(status) == 12
    assert all(s["error"].startswith("invalid answer: rank 2: ") for s in invalid)
    reasons = " | ".join(s["error"] for s in invalid)
    for word in ("'\\n'", "'\\t'", "' '", "id is empty", "NoneType", "dict", "bool", "nan", "inf"):
        assert word in reasons
    lines = (sysdir / "run.trec").read_text().splitlines()
    assert lines and all(len(line.split()) == 6 and line.split()[5] == "careless_backend_v2" for line in lines)
    assert "forged" not in (sysdir / "run.trec").read_text()
    back = read_run(sysdir / "run.trec")
    assert all(math.isfinite(s) for s in back.scores)
    for command in (["report", str(tmp_path / "out")], ["compare", str(tmp_path / "out")]):
        proc = subprocess.run([sys.executable, "-m", "retbench.cli", *command], capture_output=True, text=True, env=env)
        assert "Traceback" not in proc.stderr, proc.stderr


def test_run_builder_turns_a_bad_answer_into_an_invalid_query():
    b = RunBuilder("x")
    b.add("q1", [("d1", 2.0), ("d 2", 1.0)], latency=0.1)
    b.add("q2", [("d1", float("nan"))])
    b.add("q3", [("d1", 1.0)])
    run = b.build()
    assert run.status["q1"] == run.status["q2"] == QueryStatus.INVALID
    assert run.ranking("q1") == [] and "rank 2" in run.errors["q1"] and "rank 1" in run.errors["q2"]
    assert run.ranking("q3") == [("d1", 1.0)]


def test_run_files_with_extra_columns_are_read_as_trec_eval_reads_them(tmp_path):
    # trec_eval reads six fields per line and skips the rest (its test runs carry trailing columns)
    path = tmp_path / "results.trunc"
    path.write_text(
        "301\tQ0\tFR940202-2-00150\t1\t2.129133\tSTANDARD\t0.5\textra\n"
        "301 Q0 FR940202-2-00151 2 1.724760 STANDARD trailing words here\n"
        "302 Q0 FT911-2671 1 1.719461 STANDARD\n"
    )
    run = read_run(path)
    assert run.ranking("301") == [("FR940202-2-00150", 2.129133), ("FR940202-2-00151", 1.72476)]
    assert run.ranking("302") == [("FT911-2671", 1.719461)] and run.name == "STANDARD"
    (tmp_path / "short.trec").write_text("301 Q0 d1 1 2.0\n")
    with pytest.raises(InputError, match=r"short.trec:1: expected 6 columns"):
        read_run(tmp_path / "short.trec")


def test_write_run_makes_the_tag_one_field():
    b = RunBuilder("my\tsystem\nv2")
    b.add("q1", [("d1", 1.0)])
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        write_run(b.build(), Path(d) / "r.trec")
        assert (Path(d) / "r.trec").read_text() == "q1 Q0 d1 1 1.0 my_system_v2\n"
