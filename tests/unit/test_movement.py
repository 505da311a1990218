"""`movement.diff`: two runs compared with no labels, read from TREC files as other tools write them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retbench.data import Qrels, Run
from retbench.errors import InputError
from retbench.movement import diff


def _write_trec(path: Path, run: dict[str, list[str]], tag: str) -> None:
    """The six-column TREC run format as pytrec_eval's and ranx's users write it (space separated)."""
    lines = [f"{q} Q0 {d} {r} {100 - r:.4f} {tag}" for q, docs in run.items() for r, d in enumerate(docs, 1)]
    path.write_text("\n".join(lines) + "\n")


def _runs() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    a = {f"q{i}": [f"x{i}", "legacy", *[f"d{i}-{j}" for j in range(4)]] for i in range(8)}
    b = {q: [d for d in docs if d != "legacy"] + ["new"] for q, docs in a.items()}
    b["q0"] = list(a["q0"])  # one query keeps its ranking
    b["q1"] = list(reversed(a["q1"][:5])) + a["q1"][5:]  # one keeps its top-5 set, not its order
    return a, b


def test_diff_of_two_trec_files_counts_changed_queries_and_names_the_dropped_document(tmp_path: Path) -> None:
    a, b = _runs()
    _write_trec(tmp_path / "a.run", a, "old")
    _write_trec(tmp_path / "b.run", b, "new")
    d = diff(tmp_path / "a.run", tmp_path / "b.run", k=5, n_resamples=200)
    top5 = {q: (set(a[q][:5]), set(b[q][:5])) for q in a}
    assert d.counts["changed_set"] == sum(x != y for x, y in top5.values()) == 6
    assert d.counts["changed_order"] == 7
    assert set(d.changed_queries()) == {q for q, (x, y) in top5.items() if x != y}
    assert d.vanished[0].doc == "legacy" and d.vanished[0].queries == 6
    assert d.appeared[0].doc in {"new", "d2-3", "d3-3", "d4-3", "d5-3", "d6-3", "d7-3"}
    changed = d.measure("changed_set")
    assert changed.mean == pytest.approx(6 / 8) and changed.low <= changed.mean <= changed.high
    assert d.moved and d.moved[0].qid != "q0" and d.moved[0].top_a == a[d.moved[0].qid][:5]
    assert d.name_a == "old" and d.name_b == "new"


def test_a_query_only_one_run_answered_counts_as_moved() -> None:
    a = Run.from_dict({"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0}})
    b = Run.from_dict({"q1": {"d1": 2.0, "d2": 1.0}})
    d = diff(a, b, k=2, n_resamples=100)
    assert d.counts["only_a"] == 1 and d.changed_queries() == ["q2"]
    assert d.values["rbo_ext"].tolist() == [1.0, 0.0]
    assert any("only in" in n for n in d.notes)


def test_where_qrels_judge_some_queries_an_unchanged_top_k_keeps_its_metric() -> None:
    a, b = _runs()
    ra = Run.from_dict({q: {d: 10.0 - i for i, d in enumerate(docs)} for q, docs in a.items()})
    rb = Run.from_dict({q: {d: 10.0 - i for i, d in enumerate(docs)} for q, docs in b.items()})
    qrels = Qrels({"q0": {"x0": 1}, "q2": {"legacy": 1}, "q3": {"x3": 1}})
    d = diff(ra, rb, k=5, qrels=qrels, metric="ndcg@5", n_resamples=100)
    lab = d.labelled
    assert lab is not None and lab.n == 3 and lab.n_changed == 2
    assert lab.metric_changed_when_unchanged == 0.0  # q0: same ranking, same nDCG
    assert lab.metric_changed_when_changed == 0.5  # q2 lost its relevant doc; q3's stayed at rank 1
    assert np.isfinite(lab.spearman)


def test_bad_inputs_are_named() -> None:
    with pytest.raises(InputError, match="not found"):
        diff("no/such.run", "no/such.run")
    with pytest.raises(InputError, match="p must lie strictly between"):
        diff(Run.from_dict({"q": {"d": 1.0}}), Run.from_dict({"q": {"d": 1.0}}), p=1.0)


def test_two_runs_with_one_tool_tag_are_named_by_their_files(tmp_path: Path) -> None:
    # pyserini writes the tag `Anserini` into every run: the report must still tell current from candidate
    a, b = _runs()
    _write_trec(tmp_path / "current.trec", a, "Anserini")
    _write_trec(tmp_path / "candidate.trec", b, "Anserini")
    d = diff(tmp_path / "current.trec", tmp_path / "candidate.trec", k=5, n_resamples=100)
    assert (d.name_a, d.name_b) == ("current", "candidate")
    same = diff(Run.from_dict({"q": {"d1": 1.0}}, name="x"), Run.from_dict({"q": {"d2": 1.0}}, name="x"), k=1)
    assert (same.name_a, same.name_b) == ("x (A)", "x (B)")
