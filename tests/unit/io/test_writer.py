"""The one writer every file goes through: atomic, strict JSON (one NaN/inf policy), redacted; append-only
logs (call logs, caches) one whole redacted line per record."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest

from retbench.data.status import FAILED, MISSING, STATUSES, UNANSWERED, QueryStatus
from retbench.io.files import AppendLog, appended_records, json_safe, write_json, write_jsonl, write_text
from retbench.llm.store import VerdictCache
from retbench.secrets import register

SECRET = "wr1ter-Secret/Key+42"


@pytest.fixture(autouse=True)
def _secret() -> None:
    register(SECRET)


def test_json_is_strict_with_one_policy_for_nan_and_infinities(tmp_path):
    path = tmp_path / "m.json"
    write_json(
        path, {"mean": math.nan, "effect": math.inf, "low": -math.inf, "n": np.int64(3), "p": (np.float32(0.5),)}
    )
    text = path.read_text()
    assert json.loads(text) == {"mean": None, "effect": None, "low": None, "n": 3, "p": [0.5]}
    assert "NaN" not in text and "Infinity" not in text
    assert json_safe([math.nan, 1.0]) == [None, 1.0]


def test_every_kind_of_file_is_redacted(tmp_path):
    escaped = SECRET.replace("/", "\\u002F").replace("+", "\\u002B")  # as .NET writes it
    write_json(tmp_path / "a.json", {"error": f"server said {SECRET}"})
    write_jsonl(tmp_path / "b.jsonl", [{"raw": escaped}, {"raw": "fine"}])
    write_text(tmp_path / "c.md", f"| x | {SECRET.replace('/', '&#x2F;')} |")
    for p in tmp_path.iterdir():
        text = p.read_text()
        assert "***" in text and "wr1ter" not in text, p.name
    assert [json.loads(line)["raw"] for line in (tmp_path / "b.jsonl").read_text().splitlines()] == ["***", "fine"]


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / "summary.json"
    write_json(path, {"v": 1})

    def records():
        yield {"v": 2}
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        write_jsonl(path, records())
    assert json.loads(path.read_text()) == {"v": 1} and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_an_append_log_writes_whole_redacted_lines_from_many_threads(tmp_path):
    log = AppendLog(tmp_path / "logs" / "calls.jsonl")

    def work(t: int) -> None:
        for i in range(100):
            log.write({"thread": t, "i": i, "answer": f"echo {SECRET} " + "x" * 500, "score": math.nan})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    records = list(appended_records(tmp_path / "logs" / "calls.jsonl"))
    assert len(records) == 600 and {(r["thread"], r["i"]) for r in records} == {
        (t, i) for t in range(6) for i in range(100)
    }
    assert all(r["answer"].startswith("echo *** ") and r["score"] is None for r in records)
    AppendLog(None).write({"nothing": 1})  # a dry run's log records nothing


def test_the_judge_cache_stores_and_serves_what_it_wrote(tmp_path):
    cache = VerdictCache(tmp_path / "judge" / "k.jsonl")
    cache.put({"input_sha256": "abc", "raw": f'{{"grade": 2}} key={SECRET}', "verdict": 2})
    assert cache.get("abc") == {"input_sha256": "abc", "raw": '{"grade": 2} key=***', "verdict": 2}
    assert SECRET not in cache.path.read_text()
    again = VerdictCache(cache.path)
    for rec in appended_records(cache.path):
        again.entries[rec["input_sha256"]] = rec
    assert again.get("abc") == cache.get("abc")


def test_the_status_vocabulary_is_written_once():
    assert STATUSES == ("ok", "empty", "error", "timeout", "invalid", MISSING)
    assert {s.value for s in QueryStatus if s.failed} == FAILED
    assert FAILED | {"missing"} == UNANSWERED


def test_the_writer_creates_missing_folders(tmp_path: Path):
    write_text(tmp_path / "a" / "b" / "report.html", "<p>ok</p>")
    assert (tmp_path / "a" / "b" / "report.html").read_text() == "<p>ok</p>"


def test_a_file_that_cannot_be_written_is_named_as_asked_never_as_the_temporary_beside_it(tmp_path):
    from retbench.errors import OutputError

    taken = tmp_path / "synthetic.jsonl"
    taken.mkdir()  # `--output` naming a folder: the rename over it fails
    with pytest.raises(OutputError) as err:
        write_jsonl(taken, [{"input": "q"}])
    assert str(err.value).startswith(f"{taken}: could not write this file: is a directory, expected a file [EISDIR]")
    assert ".tmp" not in str(err.value) and err.value.exit_code == 2
    assert [p.name for p in tmp_path.iterdir()] == ["synthetic.jsonl"]  # no temporary file left beside it


def test_an_error_from_a_file_read_while_writing_is_not_blamed_on_the_file_written(tmp_path):
    def rows():
        yield {"a": 1}
        (tmp_path / "missing.txt").read_text()

    with pytest.raises(FileNotFoundError):
        write_jsonl(tmp_path / "out.jsonl", rows())
    assert not (tmp_path / "out.jsonl").exists() and list(tmp_path.iterdir()) == []
