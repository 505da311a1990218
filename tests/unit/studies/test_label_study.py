"""The label study folder: init pools the systems' top k over a BEIR folder without qrels, pairs.jsonl holds
the contract's fields, labels.jsonl is read by its rules, and the answer follows the people's grades."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retbench.api import evaluate
from retbench.data.qrels import Qrels
from retbench.errors import InputError
from retbench.io.trec import read_run
from retbench.studies.labels import pool_scores as ps
from retbench.studies.labels.answer import estimate_study, next_pairs, plan_next
from retbench.studies.labels.log import LabelLog, read_labels
from retbench.studies.labels.study import init_study, pool_pairs, read_study

DOCS = {f"d{i}": f"document number {i} about topic {i % 3}" for i in range(8)}
QUERIES = {"q1": "topic one", "q2": "topic two", "q3": "topic zero", "q4": "anything"}
TRUE = {("q1", "d1"): 2, ("q1", "d4"): 1, ("q2", "d2"): 3, ("q3", "d3"): 1, ("q4", "d5"): 1}


def _folder(tmp_path: Path) -> tuple[Path, list[Path]]:
    data = tmp_path / "traces"
    data.mkdir()
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in DOCS.items())
    )
    (data / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (data / "feedback.jsonl").write_text(
        json.dumps({"qid": "q1", "doc_id": "d1", "kind": "thumbs", "value": 1, "at": "x"}) + "\n"
    )
    rng = np.random.default_rng(3)
    runs = []
    for name in ("live", "bm25"):
        lines = []
        for q in QUERIES:
            for r, d in enumerate(rng.permutation(list(DOCS))[:4]):
                lines.append(f"{q} Q0 {d} {r + 1} {10 - r} {name}\n")
        (tmp_path / f"{name}.trec").write_text("".join(lines))
        runs.append(tmp_path / f"{name}.trec")
    return data, runs


def _grade_all(study_dir: Path, labeller: str = "ann") -> None:
    study = read_study(study_dir)
    with open(study_dir / "labels.jsonl", "a") as fh:
        for p in study.pairs:
            g = TRUE.get((p["qid"], p["doc_id"]), 0)
            fh.write(
                json.dumps(
                    {
                        "event": "grade",
                        "pair_id": p["pair_id"],
                        "qid": p["qid"],
                        "doc_id": p["doc_id"],
                        "grade": g,
                        "labeller": labeller,
                    }
                )
                + "\n"
            )


def test_init_pools_the_top_k_of_every_run_and_writes_the_contract_files(tmp_path):
    data, runs = _folder(tmp_path)
    study = init_study(tmp_path / "study", data, runs, k=3, metric="nDCG@3", decision=("live", "bm25"), seed=5)
    back = read_study(tmp_path / "study")
    assert back.meta == study.meta and back.pairs == study.pairs
    assert back.meta["systems"] == ["live", "bm25"] and back.meta["decision"] == {"a": "live", "b": "bm25"}
    assert sorted(p.name for p in (tmp_path / "study" / "runs").iterdir()) == ["bm25.trec", "live.trec"]
    assert (tmp_path / "study" / "feedback.jsonl").is_file()  # kept as its own source, not as labels
    live, bm25 = (read_run(r, name=r.stem) for r in runs)
    for p in back.pairs:
        assert p["llm"] is None and p["order"] is None and p["pi"] is None
        assert p["query"] == QUERIES[p["qid"]] and p["doc_text"] == DOCS[p["doc_id"]]
        for name, run in (("live", live), ("bm25", bm25)):
            top = run.docs(p["qid"])[:3]
            assert p["pooled_by"].get(name) == (top.index(p["doc_id"]) + 1 if p["doc_id"] in top else None)
    assert [p["pair_id"] for p in back.pairs] == list(range(len(back.pairs)))
    assert {(p["qid"], p["doc_id"]) for p in back.pairs} == {
        (q, d) for r in (live, bm25) for q in QUERIES for d in r.docs(q)[:3]
    }


def test_init_refuses_a_decision_naming_an_unknown_system_and_an_existing_study(tmp_path):
    data, runs = _folder(tmp_path)
    with pytest.raises(InputError, match="decision"):
        init_study(tmp_path / "s", data, runs, decision=("live", "dense"))
    init_study(tmp_path / "s", data, runs)
    with pytest.raises(InputError, match="already exists"):
        init_study(tmp_path / "s", data, runs)


def test_pool_ndcg_is_retbench_ndcg_when_the_pool_holds_every_judged_document(tmp_path):
    _, runs = _folder(tmp_path)
    found = [read_run(r, name=r.stem) for r in runs]
    pairs = pool_pairs(found, 4, list(QUERIES))
    pool = ps.pool_arrays(pairs, ["live", "bm25"], "ndcg", 4)
    qrels = {q: {d: TRUE.get((q, d), 0) for d in {p["doc_id"] for p in pairs if p["qid"] == q}} for q in QUERIES}
    grades = np.array([qrels[p["qid"]][p["doc_id"]] for p in pairs], dtype=float)
    values = ps.scores(pool, pool.gather(grades))
    for s, run in enumerate(found):
        ev = evaluate(Qrels(qrels), run, ["ndcg@4"], no_relevant="zero")
        by_q = dict(zip(ev.query_ids, ev.column("ndcg@4"), strict=True))
        assert values[s] == pytest.approx([by_q.get(q, 0.0) for q in pool.qids])


def test_with_every_pair_graded_the_answer_is_the_human_metric(tmp_path):
    data, runs = _folder(tmp_path)
    init_study(tmp_path / "s", data, runs, k=3, metric="nDCG@3", decision=("live", "bm25"))
    _grade_all(tmp_path / "s")
    ans = estimate_study(tmp_path / "s")
    study = read_study(tmp_path / "s")
    pool = ps.pool_arrays(study.pairs, study.systems, "ndcg", 3)
    true = np.array([TRUE.get((p["qid"], p["doc_id"]), 0) for p in study.pairs], dtype=float)
    values = ps.scores(pool, pool.gather(true))
    assert ans["systems"]["live"]["estimate"] == "human"
    assert ans["systems"]["live"]["mean"] == pytest.approx(values[0].mean())
    assert ans["difference"]["mean"] == pytest.approx((values[1] - values[0]).mean())
    assert ans["systems"]["bm25"]["n_human"] == len(study.pairs)


def test_without_labels_the_answer_is_the_llm_estimate_and_says_so(tmp_path):
    data, runs = _folder(tmp_path)
    init_study(tmp_path / "s", data, runs, k=3, metric="nDCG@3")
    study = read_study(tmp_path / "s")
    for p in study.pairs:
        p["llm"] = {"grade": 1, "status": "ok", "probs": {"0": 0.3, "1": 0.7}}
    study.save_pairs()
    ans = estimate_study(tmp_path / "s")
    assert {b["estimate"] for b in ans["systems"].values()} == {"LLM"}
    assert ans["systems"]["live"]["judged"] == 1.0 and ans["systems"]["live"]["n_human"] == 0


def test_next_pairs_follow_the_queue_and_skip_what_this_labeller_graded_or_skipped(tmp_path):
    data, runs = _folder(tmp_path)
    init_study(tmp_path / "s", data, runs, k=3, decision=("live", "bm25"), seed=1)
    with pytest.raises(InputError, match="label prelabel"):
        next_pairs(tmp_path / "s", "ann", 4)  # a queue made before the judge has graded would stay uninformed
    study = read_study(tmp_path / "s")
    for p in study.pairs:
        p["llm"] = {"grade": 0, "status": "ok", "probs": {"0": 0.7, "1": 0.1, "2": 0.1, "3": 0.1}}
    study.save_pairs()
    first = next_pairs(tmp_path / "s", "ann", 4)
    study = read_study(tmp_path / "s")
    orders = {p["pair_id"]: p["order"] for p in study.pairs}
    assert sorted(orders.values()) == list(range(len(study.pairs)))
    assert [orders[i] for i in first] == sorted(orders[i] for i in first) == [0, 1, 2, 3]
    with open(tmp_path / "s" / "labels.jsonl", "a") as fh:
        fh.write(json.dumps({"event": "grade", "pair_id": first[0], "grade": 1, "labeller": "ann"}) + "\n")
        fh.write(json.dumps({"event": "skip", "pair_id": first[1], "grade": None, "labeller": "ann"}) + "\n")
    assert next_pairs(tmp_path / "s", "ann", 2) == first[2:4]
    assert next_pairs(tmp_path / "s", "bob", 1) == [first[1]]  # ann's grade stands; her skip is not a label


def test_plan_next_writes_pi_for_the_budget_and_expects_a_narrower_interval_with_more_labels(tmp_path):
    data, runs = _folder(tmp_path)
    init_study(tmp_path / "s", data, runs, k=3, decision=("live", "bm25"))
    study = read_study(tmp_path / "s")
    for p in study.pairs:
        p["llm"] = {"grade": 0, "status": "ok", "probs": {"0": 0.6, "1": 0.2, "2": 0.1, "3": 0.1}}
    study.save_pairs()
    small, big = plan_next(tmp_path / "s", 3), plan_next(tmp_path / "s", 12)
    assert len(small["pairs"]) == 3 and len(big["pairs"]) == 12
    assert big["expected_half_width"]["difference"] < small["expected_half_width"]["difference"]
    assert all(0 < p["pi"] <= 1 for p in read_study(tmp_path / "s").pairs)


def test_the_label_log_is_read_by_its_rules_undo_and_a_cut_last_line(tmp_path):
    lines = [
        {"event": "grade", "pair_id": 0, "grade": 2, "labeller": "ann"},
        {"event": "grade", "pair_id": 0, "grade": 3, "labeller": "ann"},
        {"event": "undo", "pair_id": 0, "grade": None, "labeller": "ann", "undoes": 1},
        {"event": "grade", "pair_id": 1, "grade": 1, "labeller": "ann"},
        {"event": "grade", "pair_id": 1, "grade": 3, "labeller": "bob"},
        {"event": "skip", "pair_id": 2, "grade": None, "labeller": "bob"},
    ]
    text = "".join(json.dumps(x) + "\n" for x in lines) + '{"event": "grade", "pair_id": 2, "gr'
    (tmp_path / "labels.jsonl").write_text(text)
    ev = read_labels(tmp_path)
    assert ev.by_labeller() == {"ann": {0: 2, 1: 1}, "bob": {1: 3}}
    assert ev.human_grades() == {0: 2, 1: 1}  # the lower median of 1 and 3
    assert ev.done("bob") == {1, 2} and ev.note is not None
    (tmp_path / "labels.jsonl").write_text("not json\n" + json.dumps(lines[0]) + "\n")
    with pytest.raises(InputError, match=r"labels\.jsonl:1"):
        read_labels(tmp_path)


def test_the_estimate_reads_labels_as_the_page_does_an_unterminated_last_line_is_torn(tmp_path):
    """A writer killed before its newline leaves a line that may still parse; it was never acknowledged, so the
    page ignores it, and the study's answer must count exactly the grades the page counts."""
    data, runs = _folder(tmp_path)
    init_study(tmp_path / "s", data, runs, k=3, decision=("live", "bm25"))
    _grade_all(tmp_path / "s")
    path = tmp_path / "s" / "labels.jsonl"
    path.write_text(path.read_text().rstrip("\n"))  # the last grade lost its newline
    n = len(read_study(tmp_path / "s").pairs)
    page = LabelLog(tmp_path / "s").read()
    answer = estimate_study(tmp_path / "s")
    assert len(page.by_labeller()["ann"]) == n - 1
    assert answer["labels"]["pairs_graded"] == n - 1 and len(answer["labels"]["notes"]) == 1


def test_an_estimate_past_the_metrics_range_is_held_inside_it_and_says_so():
    # what 3 queries with 2 labelled gave in the trace walk-through: nDCG@2 1.2355 [-1.1861, 3.6572]
    from retbench.report.label_study import answer_lines
    from retbench.studies.labels.answer import _clipped

    block = {"mean": 1.2355, "low": -1.1861, "high": 3.6572, "estimate": "PPI", "n_human": 7, "n_llm": 6}
    block["logged"] = {"low": -1.1861, "high": 3.6572}
    block["population"] = {"low": -2.0, "high": 4.0}
    held = _clipped(block, 0.0, 1.0)
    assert (held["mean"], held["low"], held["high"], held["clipped"]) == (1.0, 0.0, 1.0, "[0, 1]")
    assert held["logged"] == {"low": 0.0, "high": 1.0} and held["population"] == {"low": 0.0, "high": 1.0}
    assert block["mean"] == 1.2355  # the estimate itself is left as computed
    inside = {"mean": 0.4, "low": 0.1, "high": 0.7, "estimate": "PPI", "n_human": 7, "n_llm": 6}
    assert _clipped(inside, 0.0, 1.0) == inside  # nothing moved: no `clipped`
    answer = {"metric": "nDCG@2", "systems": {"bm25": {**held, "judged": 1.0}}}
    assert "bm25: nDCG@2 1.0000 [0.0000, 1.0000] (PPI, 7 human / 6 LLM labels, judged@2 1.00, clipped to [0, 1])" in (
        answer_lines(answer, k=2)
    )


def test_per_system_intervals_of_a_decision_study_partly_labelled_are_said_to_be_indicative():
    from retbench.report.label_study import answer_lines

    def block(labelled: int) -> dict:
        kind = "human" if labelled == 100 else "PPI"
        base = {"mean": 0.5, "low": 0.4, "high": 0.6, "estimate": kind, "n_human": 9, "n_llm": 90, "judged": 1.0}
        return {**base, "n_queries": 100, "n_queries_human": labelled}

    diff = {"a": "A", "b": "B", "mean": 0.01, "low": -0.02, "high": 0.04, "estimate": "PPI", "n_human": 9}
    few = {"metric": "nDCG@10", "systems": {"A": block(5), "B": block(5)}, "difference": {**diff, "n_llm": 90}}
    said = "Each system's own interval is indicative: the labelling queue was chosen for B − A"
    assert any(line.startswith(said) for line in answer_lines(few))
    every = {**few, "systems": {"A": block(100), "B": block(100)}}  # all labelled: human labels alone
    assert not any(line.startswith(said) for line in answer_lines(every))
    means_only = {"metric": "nDCG@10", "systems": {"A": block(5)}}  # no decision: the queue was chosen for the means
    assert not any(line.startswith("Each system's") for line in answer_lines(means_only))
