"""The label log (STUDY/labels.jsonl): durable appends, torn tails, undo as a stack, several labellers, kappa."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from retbench.errors import InputError
from retbench.studies.labels.agreement import kappa
from retbench.studies.labels.log import LabelLog, agreement_summary, doc_sha256, read_labels


def _pair(i: int) -> dict:
    return {"pair_id": i, "qid": f"q{i // 3}", "doc_id": f"d{i}", "query": f"query {i // 3}", "doc_text": f"text {i}"}


def _shown(i: int) -> dict:
    return {"query": f"query {i // 3}", "doc_sha256": doc_sha256(f"text {i}"), "llm_hidden": True, "highlight": []}


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_event_is_one_line_with_the_contract_fields_and_its_line_index(tmp_path):
    log = LabelLog(tmp_path)
    assert log.record("grade", _pair(0), "ann", _shown(0), grade=2)[0] == 0
    assert log.record("skip", _pair(1), "ann", _shown(1))[0] == 1
    events = _lines(tmp_path / "labels.jsonl")
    assert [e["event"] for e in events] == ["grade", "skip"]
    first = events[0]
    assert {k: first[k] for k in ("pair_id", "qid", "doc_id", "grade", "labeller", "undoes")} == {
        "pair_id": 0, "qid": "q0", "doc_id": "d0", "grade": 2, "labeller": "ann", "undoes": None,
    }  # fmt: skip
    assert first["shown"]["doc_sha256"] == doc_sha256("text 0") and first["shown"]["llm_hidden"] is True
    assert first["at"].endswith("Z")
    assert events[1]["grade"] is None


def test_a_torn_last_line_is_ignored_with_a_note_and_cut_off_by_the_next_append(tmp_path):
    log = LabelLog(tmp_path)
    log.record("grade", _pair(0), "ann", _shown(0), grade=1)
    with open(tmp_path / "labels.jsonl", "a") as fh:
        fh.write('{"event": "grade", "pair_id": 1, "qid"')  # a writer killed mid-line
    labels = read_labels(tmp_path)
    assert labels.effective("ann") == {0: 1}
    assert labels.note is not None and "labels.jsonl:2" in labels.note
    assert LabelLog(tmp_path).record("grade", _pair(2), "ann", _shown(2), grade=3)[0] == 1
    assert [e["pair_id"] for e in _lines(tmp_path / "labels.jsonl")] == [0, 2]  # every line whole again
    assert read_labels(tmp_path).note is None


def test_a_malformed_line_in_the_middle_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"event": "grade", "pair_id": 0, "labeller": "a", "grade": 1}\nnot json\n')
    with pytest.raises(InputError, match=r"labels.jsonl:2"):
        read_labels(tmp_path)


def test_undo_takes_back_the_labellers_latest_events_one_by_one(tmp_path):
    log = LabelLog(tmp_path)
    log.record("grade", _pair(0), "ann", _shown(0), grade=1)
    log.record("skip", _pair(1), "ann", _shown(1))
    log.record("grade", _pair(2), "bob", _shown(2), grade=0)  # another person's event is not ann's to undo
    index, event, old = log.undo("ann")
    assert (index, event["undoes"], old["event"], event["pair_id"]) == (3, 1, "skip", 1)
    assert log.read().done("ann") == {0}
    _, event, old = log.undo("ann")
    assert (event["undoes"], old["pair_id"]) == (0, 0)
    assert log.read().effective("ann") == {}
    assert log.undo("ann") is None
    assert log.read().effective("bob") == {2: 0}


def test_a_regrade_after_undo_is_the_effective_label(tmp_path):
    log = LabelLog(tmp_path)
    log.record("grade", _pair(0), "ann", _shown(0), grade=1)
    log.undo("ann")
    log.record("grade", _pair(0), "ann", _shown(0), grade=3)
    assert log.read().effective("ann") == {0: 3}


def test_a_repeated_answer_is_stored_once_and_a_different_one_needs_an_undo(tmp_path):
    log = LabelLog(tmp_path)
    first = log.record("grade", _pair(0), "ann", _shown(0), grade=2)
    again = log.record("grade", _pair(0), "ann", _shown(0), grade=2)
    assert again[0] == first[0] and again[2] is True
    with pytest.raises(InputError, match="already graded 2 by ann; undo it first"):
        log.record("grade", _pair(0), "ann", _shown(0), grade=1)
    assert len(_lines(tmp_path / "labels.jsonl")) == 1


def test_two_labellers_keep_their_own_labels_of_the_same_pair(tmp_path):
    log = LabelLog(tmp_path)
    log.record("grade", _pair(0), "ann", _shown(0), grade=3)
    log.record("grade", _pair(0), "bob", _shown(0), grade=0)
    assert read_labels(tmp_path).by_labeller() == {"ann": {0: 3}, "bob": {0: 0}}


def test_concurrent_appends_from_many_threads_give_whole_lines_with_distinct_indexes(tmp_path):
    log = LabelLog(tmp_path)
    indexes: list[int] = []

    def worker(who: str) -> None:
        for i in range(10):
            indexes.append(log.record("grade", _pair(i), who, _shown(i), grade=i % 4)[0])

    threads = [threading.Thread(target=worker, args=(f"p{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(indexes) == list(range(40))
    assert len(_lines(tmp_path / "labels.jsonl")) == 40


def test_agreement_is_cohens_kappa_on_the_pairs_both_people_graded(tmp_path):
    log = LabelLog(tmp_path)
    ann = {0: 3, 1: 0, 2: 2, 3: 0, 4: 1}
    bob = {0: 2, 1: 0, 2: 0, 3: 0, 5: 3}
    for who, grades in (("ann", ann), ("bob", bob)):
        for pid, g in grades.items():
            log.record("grade", _pair(pid), who, _shown(pid), grade=g)
    log.record("grade", _pair(6), "cy", _shown(6), grade=1)  # shares no pair with anyone: no row
    summary = agreement_summary(tmp_path)
    assert summary["labellers"] == {"ann": 5, "bob": 5, "cy": 1}
    (row,) = summary["pairs"]
    assert (row["a"], row["b"], row["n"]) == ("ann", "bob", 4)
    # pairs 0..3: relevant (>= 1) ann 1,0,1,0 and bob 1,0,0,0: p_o = 3/4, p_e = 1/2*1/4 + 1/2*3/4 = 1/2
    assert row["kappa"] == pytest.approx(0.5)
    assert row["kappa"] == pytest.approx(kappa(np.array([1, 0, 1, 0]), np.array([1, 0, 0, 0])))
    assert row["exact"] == pytest.approx(2 / 4)


def test_agreement_uses_the_studys_relevance_cut_when_it_sets_one(tmp_path):
    (tmp_path / "study.json").write_text(json.dumps({"relevant_from": 2}))
    log = LabelLog(tmp_path)
    for pid, (a, b) in enumerate([(1, 1), (2, 3), (0, 2), (3, 1)]):
        log.record("grade", _pair(pid), "ann", _shown(pid), grade=a)
        log.record("grade", _pair(pid), "bob", _shown(pid), grade=b)
    (row,) = agreement_summary(tmp_path)["pairs"]
    # relevant (>= 2): ann 0,1,0,1, bob 0,1,1,0: p_o = 1/2, p_e = 1/2: kappa 0
    assert row["relevant_from"] == 2 and row["kappa"] == pytest.approx(0.0)


def test_an_undone_grade_does_not_count_toward_agreement(tmp_path):
    log = LabelLog(tmp_path)
    log.record("grade", _pair(0), "ann", _shown(0), grade=3)
    log.record("grade", _pair(0), "bob", _shown(0), grade=3)
    log.undo("bob")
    assert agreement_summary(tmp_path)["pairs"] == []
