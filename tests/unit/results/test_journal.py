"""The journal: what was appended comes back once, a torn tail is dropped, corruption is reported."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from retbench.data import QueryStatus
from retbench.errors import ConfigError, InputError
from retbench.results.journal import Journal, run_from_records


def _fill(path: Path, n: int, fingerprint: str = "fp") -> None:
    with Journal(path, fingerprint, batch_size=4) as j:
        for i in range(n):
            j.append_query(f"q{i}", f"q{i}", [(f"d{i}", 2.0), ("d0", 1.0 if i else 0.5)], latency=0.001 * i)


def test_reopen_returns_every_record_once_with_rankings_and_status(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    _fill(path, 10)
    with Journal(path, "fp") as j:
        j.append_query("bad", "bad", status=QueryStatus.ERROR, error="ConnectionError: refused", latency=0.5)
    j = Journal(path, "fp")
    assert j.done() == {f"q{i}" for i in range(10)} | {"bad"}
    run = j.replay(name="sys")
    j.close()
    assert run.query_ids[:3] == ["q0", "q1", "q2"]
    assert run.ranking("q3") == [("d3", 2.0), ("d0", 1.0)]
    assert run.status["bad"] is QueryStatus.ERROR and run.errors["bad"] == "ConnectionError: refused"
    assert run.status["q1"] is QueryStatus.OK
    assert math.isclose(run.latency["q4"], 0.004)


def test_unflushed_batch_is_not_on_disk_until_flush(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    j = Journal(path, "fp", batch_size=100)
    j.append("a", x=1)
    assert "a" in j.done()
    assert len(path.read_text().splitlines()) == 1  # header only
    j.flush()
    assert len(path.read_text().splitlines()) == 2
    j.close()


def test_torn_last_line_is_dropped_and_truncated_so_appends_stay_clean(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    _fill(path, 5)
    whole = path.read_bytes()
    with open(path, "ab") as fh:  # a SIGKILL in the middle of writing a line
        fh.write(b'{"key":"q5","qid":"q5","status":"ok","docs":["d5"],"sco')
    j = Journal(path, "fp")
    assert j.torn == 1
    assert "q5" not in j.done() and len(j.done()) == 5
    assert path.read_bytes() == whole
    j.append_query("q5", "q5", [("d5", 1.0)])
    j.close()
    lines = path.read_text().splitlines()
    assert all(json.loads(line) for line in lines)
    with Journal(path, "fp") as again:
        assert again.done() == {f"q{i}" for i in range(6)}


def test_zero_filled_last_line_counts_as_torn(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    _fill(path, 3)
    with open(path, "ab") as fh:
        fh.write(b"\x00" * 40 + b"\n")
    j = Journal(path, "fp")
    assert j.torn == 1 and len(j) == 3
    j.close()


def test_corrupt_line_in_the_middle_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    _fill(path, 4)
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:10]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        Journal(path, "fp")
    assert err.value.line == 3 and "corrupt" in str(err.value)


def test_other_configuration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    _fill(path, 2, fingerprint="aaa")
    with pytest.raises(ConfigError, match="different configuration"):
        Journal(path, "bbb")


def test_same_key_twice_is_refused_in_process_and_kept_once_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    j = Journal(path, "fp")
    j.append("k", v=1)
    with pytest.raises(ValueError, match="already holds"):
        j.append("k", v=2)
    j.close()
    with open(path, "a") as fh:  # as if two writers had shared the file
        fh.write(json.dumps({"key": "k", "v": 3}) + "\n")
    j = Journal(path, "fp")
    assert j.duplicates == 1
    assert [r["v"] for r in j.records()] == [1]
    j.close()


def test_run_from_records_keeps_the_first_record_of_a_query() -> None:
    recs = [
        {"qid": "a", "status": "timeout", "error": "TimeoutError: late", "docs": [], "scores": []},
        {"qid": "a", "status": "ok", "docs": ["x"], "scores": [1.0]},
        {"qid": "b", "status": "ok", "docs": ["y", "z"], "scores": [1.0, 2.0]},
    ]
    run = run_from_records(recs)
    assert run.status["a"] is QueryStatus.TIMEOUT and run.docs("a") == []
    assert run.docs("b") == ["z", "y"]  # trec_eval order re-established


def test_a_changed_system_parameter_is_refused_with_the_way_on_and_force_takes_it(tmp_path: Path) -> None:
    import yaml
    from typer.testing import CliRunner

    from retbench.cli import app

    def config(k1: float) -> Path:
        cfg = {
            "name": "changed",
            "output": str(tmp_path / "out"),
            "depth": 10,
            "metrics": ["ndcg@10"],
            "datasets": [{"name": "scifact", "max_queries": 6, "corpus_sample": 100}],
            "systems": [{"name": "bm25", "adapter": "bm25s", "params": {"k1": k1}}],
        }
        path = tmp_path / "exp.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    run = CliRunner()
    assert run.invoke(app, ["run", str(config(1.2)), "--quiet", "--no-history"]).exit_code == 0
    changed = run.invoke(app, ["run", str(config(0.9)), "--quiet", "--no-history"])
    assert changed.exit_code == 2, changed.output
    assert "journal was written by a different configuration" in changed.output
    assert "pass --force to redo this system from scratch" in changed.output
    forced = run.invoke(app, ["run", str(config(0.9)), "--quiet", "--no-history", "--force"])
    assert forced.exit_code == 0, forced.output


def _damage(path: Path, line: int, **change: object) -> None:
    lines = path.read_text().splitlines()
    rec = json.loads(lines[line - 1])
    for k, v in change.items():
        if v is None:
            rec.pop(k)
        else:
            rec[k] = v
    lines[line - 1] = json.dumps(rec)  # json.dumps writes NaN and Infinity as the bare words a damaged file holds
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"qid": None}, "without 'qid'"),
        ({"scores": [float("nan"), 1.0]}, "finite"),
        ({"scores": [float("inf"), 1.0]}, "finite"),
        ({"docs": ["d 2", "d0"]}, "whitespace"),
        ({"qid": "q\t2"}, "whitespace"),
        ({"latency": float("nan")}, "latency"),
    ],
)
def test_a_damaged_record_is_not_done_so_its_query_is_asked_again_and_the_file_line_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, change: dict[str, object], words: str
) -> None:
    path = tmp_path / "j.jsonl"
    _fill(path, 5)
    _damage(path, 4, **change)  # line 4 holds q2 (line 1 is the header)
    with caplog.at_level("WARNING", logger="retbench.journal"), Journal(path, "fp") as j:
        assert j.done() == {"q0", "q1", "q3", "q4"}
        assert [line for line, _ in j.damaged] == [4] and words in j.damaged[0][1]
        assert "q2" not in j.replay().query_ids
        j.append_query("q2", "q2", [("d2", 2.0)])  # the resumed run asks it again
    assert f"{path}:4: damaged journal record" in caplog.text
    with Journal(path, "fp") as j:
        assert j.done() == {f"q{i}" for i in range(5)} and j.replay().ranking("q2") == [("d2", 2.0)]


def test_a_backend_answer_with_a_nan_score_is_journaled_as_invalid_never_with_the_nan(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path, "fp") as j:
        j.append_query("q", "q", [("d1", float("nan")), ("d2", 1.0)], latency=0.1)
    text = path.read_text()
    assert "NaN" not in text
    with Journal(path, "fp") as j:
        assert j.damaged == [] and j.done() == {"q"}
        run = j.replay()
    assert run.status["q"] is QueryStatus.INVALID and "finite" in run.errors["q"] and run.docs("q") == []
