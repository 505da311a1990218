"""`retbench.evaluate` / `retbench.compare` take what ranx, pytrec_eval and PyTerrier users already hold.

Every input form (dicts, DataFrames under each library's column names, TREC and BEIR paths, Run/Qrels)
is scored and checked against pytrec_eval on the same data to 1e-9.
"""

from __future__ import annotations

import doctest
import importlib
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

import retbench
from loaded_modules import modules_after
from retbench.data import Qrels, Run
from retbench.errors import InputError
from retbench.io.trec import write_run
from trec_oracle import ORACLE, PAIRS, qrels_and_run

NAMES = [name for _, name in PAIRS]


def _assert_matches_pytrec_eval(ev, qrels, run):
    theirs = ORACLE(qrels, run)
    for trec_name, name in PAIRS:
        col = dict(zip(ev.query_ids, ev.column(name).tolist(), strict=True))
        for qid in qrels:
            expected = theirs[qid][trec_name] if qid in theirs else 0.0
            assert col[qid] == pytest.approx(expected, abs=1e-9), (name, qid)


def _run_frame(run, columns=("query_id", "doc_id", "score")):
    rows = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    return pd.DataFrame(rows, columns=list(columns))


def _qrels_frame(qrels, columns=("query_id", "doc_id", "relevance")):
    rows = [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    return pd.DataFrame(rows, columns=list(columns))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run())
def test_plain_dicts_score_as_pytrec_eval_scores_them(data):
    qrels, run = data
    ev = retbench.evaluate(qrels, run, NAMES, no_relevant="zero")
    assert ev.query_ids == list(qrels)
    _assert_matches_pytrec_eval(ev, qrels, run)


@pytest.mark.parametrize(
    ("run_cols", "qrels_cols"),
    [
        (("query_id", "doc_id", "score"), ("query_id", "doc_id", "relevance")),
        (("qid", "docno", "score"), ("qid", "docno", "label")),  # PyTerrier
        (("q_id", "doc_id", "score"), ("q_id", "doc_id", "score")),  # ranx
    ],
)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run())
def test_dataframes_under_each_librarys_column_names_score_as_pytrec_eval(run_cols, qrels_cols, data):
    qrels, run = data
    ev = retbench.evaluate(_qrels_frame(qrels, qrels_cols), _run_frame(run, run_cols), NAMES, no_relevant="zero")
    assert sorted(ev.query_ids) == sorted(qrels)
    _assert_matches_pytrec_eval(ev, qrels, run)


def test_trec_and_beir_paths_score_like_the_dicts_they_hold(tmp_path):
    qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    run = {"q1": {"d2": 3.0, "d1": 2.0, "d9": 1.0}, "q2": {"d3": 0.5}}
    (tmp_path / "qrels.trec").write_text("q1 0 d1 2\nq1 0 d2 0\nq2 0 d3 1\n")
    beir = tmp_path / "beir" / "qrels"
    beir.mkdir(parents=True)
    (beir / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td3\t1\n")
    write_run(Run.from_dict(run), tmp_path / "run.trec")
    expected = retbench.evaluate(qrels, run, NAMES).means()
    for q in (tmp_path / "qrels.trec", beir / "test.tsv", tmp_path / "beir", Qrels(qrels)):
        for r in (tmp_path / "run.trec", str(tmp_path / "run.trec"), Run.from_dict(run)):
            assert retbench.evaluate(q, r, NAMES).means() == pytest.approx(expected, abs=1e-12)
    _assert_matches_pytrec_eval(retbench.evaluate(tmp_path / "beir", tmp_path / "run.trec", NAMES), qrels, run)


def test_evaluation_to_pandas_is_the_per_query_table():
    ev = retbench.evaluate({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": {"a": 1.0}, "q2": {"x": 1.0, "b": 0.5}}, ["mrr"])
    frame = ev.to_pandas()
    assert list(frame.index) == ["q1", "q2"]
    assert frame.index.name == "query_id"
    assert list(frame.columns) == ["status", "mrr"]
    assert frame["mrr"].tolist() == [1.0, 0.5]
    assert ev.means() == {"mrr": 0.75}
    assert ev.per_query()[1] == {"query_id": "q2", "status": "ok", "mrr": 0.5}


def test_a_judged_query_missing_from_the_run_counts_as_zero():
    ev = retbench.evaluate({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": {"a": 1.0}}, ["mrr"])
    assert ev.means() == {"mrr": 0.5}
    assert ev.to_pandas().loc["q2", "status"] == "missing"


def test_compare_takes_a_mapping_of_runs_and_gives_a_table():
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(12)}
    good = {q: {next(iter(j)): 1.0, "x": 0.5} for q, j in qrels.items()}
    bad = {q: {"x": 1.0, next(iter(j)): 0.5} for q, j in qrels.items()}
    cmp = retbench.compare({"bad": bad, "good": good}, qrels, ["mrr", "hit@1"], n_resamples=2000)
    frame = cmp.to_pandas()
    assert list(frame["metric"]) == ["mrr", "hit@1"]
    row = frame.set_index("metric").loc["mrr"]
    assert (row["system_a"], row["system_b"]) == ("bad", "good")
    assert row["mean_a"] == 0.5 and row["mean_b"] == 1.0 and row["delta"] == 0.5
    assert row["wins"] == 12 and row["losses"] == 0
    assert row["p_randomization"] < 0.01
    assert "p_randomization_holm" in frame.columns


def test_compare_against_a_baseline_compares_every_other_run_with_it():
    qrels = {"q": {"d": 1}}
    runs = {"base": {"q": {"d": 1.0}}, "x": {"q": {"e": 1.0}}, "y": {"q": {"d": 1.0}}}
    cmp = retbench.compare(runs, qrels, "mrr", baseline="base", n_resamples=10)
    assert [(p.system_a, p.system_b) for p in cmp.pairs] == [("base", "x"), ("base", "y")]


def test_dataframes_without_known_columns_are_refused_naming_the_columns():
    frame = pd.DataFrame({"question": ["q"], "passage": ["d"], "s": [1.0]})
    with pytest.raises(InputError, match=r"no query id column in the run DataFrame .*have: question, passage, s"):
        retbench.evaluate({"q": {"d": 1}}, frame, ["mrr"])
    with pytest.raises(InputError, match=r"field .label\[0\].: grade must be an integer, got 0.5"):
        retbench.evaluate(pd.DataFrame({"qid": ["q"], "docno": ["d"], "label": [0.5]}), {"q": {"d": 1.0}}, ["mrr"])


def test_to_pandas_without_pandas_says_how_to_install_it(monkeypatch):
    ev = retbench.evaluate({"q": {"d": 1}}, {"q": {"d": 1.0}}, ["mrr"])
    monkeypatch.setitem(sys.modules, "pandas", None)  # what `import pandas` sees when it is not installed
    with pytest.raises(InputError, match=r"pip install 'retbench\[pandas\]'"):
        ev.to_pandas()


def test_ignore_identical_ids_drops_a_retrieved_doc_named_like_its_query():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    run = {"q1": {"q1": 9.0, "d1": 1.0}, "q2": {"d2": 2.0, "q2": 1.0, "x": 0.5}}
    assert retbench.evaluate(qrels, run, ["mrr"]).means() == {"mrr": 0.75}
    ev = retbench.evaluate(qrels, run, ["mrr", "P@2"], ignore_identical_ids=True)
    assert ev.means() == {"mrr": 1.0, "P@2": 0.5}
    assert ev.ignore_identical_ids and ev.to_dict()["ignore_identical_ids"] is True
    # the same as removing those documents by hand, on every measure pytrec_eval knows
    cleaned = {q: {d: s for d, s in docs.items() if d != q} for q, docs in run.items()}
    _assert_matches_pytrec_eval(retbench.evaluate(qrels, run, NAMES, ignore_identical_ids=True), qrels, cleaned)


def test_ignore_identical_ids_keeps_statuses_and_empty_rankings():
    run = Run.from_dict({"a": {"a": 1.0}, "b": {}, "c": {"x": 1.0, "c": 0.5}}, status={"b": "error"})
    out = run.without_identical_ids()
    assert out.to_dict() == {"a": {}, "b": {}, "c": {"x": 1.0}}
    assert out.status["b"].value == "error"


def test_ignore_identical_ids_survives_the_per_query_table(tmp_path):
    ev = retbench.evaluate({"q": {"d": 1}}, {"q": {"q": 2.0, "d": 1.0}}, ["mrr"], ignore_identical_ids=True)
    ev.to_tsv(tmp_path / "pq.tsv")
    assert type(ev).from_tsv(tmp_path / "pq.tsv").ignore_identical_ids is True


def test_the_docstring_examples_run():
    for name in ("retbench", "retbench.api", "retbench.evaluation.table"):
        result = doctest.testmod(importlib.import_module(name))
        assert result.attempted > 0 and result.failed == 0, name


def test_importing_retbench_loads_nothing_until_a_name_is_used(tmp_path):
    assert modules_after("import retbench", tmp_path).loaded(["retbench.evaluation", "numpy"]) == []
    assert set(retbench.__all__) >= {"evaluate", "compare", "Run", "Qrels", "Evaluation", "load_dataset"}
    assert retbench.Run is Run
    assert np.isclose(retbench.evaluate({"q": {"d": 1}}, {"q": {"d": 1.0}}, ["ndcg@10"]).mean("ndcg@10"), 1.0)


def test_the_docs_python_api_example_runs(capsys):
    from repo_paths import ROOT

    text = (ROOT / "docs" / "howto" / "python-api.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/howto/python-api.md", "exec"), {})
    out = capsys.readouterr().out
    assert "'recall@2': 0.75" in out and "'mrr': 1.0" in out
    assert "p_randomization_holm" in out


# -- the API holds dicts and DataFrames to the rules of the files ---------------------------------------
def _file_reason(tmp_path, line):
    """The reason the TREC run reader gives for one bad line (what the API must say for the same value)."""
    path = tmp_path / "bad.run"
    path.write_text(line)
    with pytest.raises(InputError) as err:
        retbench.evaluate({"q": {"d": 1}}, path, ["mrr"])
    return err.value.reason


@pytest.mark.parametrize(
    ("score", "line"),
    [(float("nan"), "q Q0 d 1 nan t\n"), (float("inf"), "q Q0 d 1 inf t\n"), (float("-inf"), "q Q0 d 1 -inf t\n")],
)
def test_a_non_finite_score_in_a_dict_is_refused_as_in_a_run_file(tmp_path, score, line):
    with pytest.raises(InputError) as err:
        retbench.evaluate({"q": {"d": 1}}, {"q": {"e": 1.0, "d": score}}, ["mrr"])
    assert err.value.field == "run['q']['d']"
    assert (
        err.value.reason.split(", got")[0] == _file_reason(tmp_path, line).split(", got")[0] == ("score must be finite")
    )


@pytest.mark.parametrize(
    ("run", "field", "reason"),
    [
        ({"q": {"d": None}}, "run['q']['d']", "score must be a number, got None"),
        ({"q": {"d": "high"}}, "run['q']['d']", "score must be a number, got 'high'"),
        ({None: {"d": 1.0}}, "run", "query id must be a string, got NoneType None"),
        ({"q": {1.5: 1.0}}, "run['q']", "document id must be a string, got float 1.5"),
        ({"q": {("a", "b"): 1.0}}, "run['q']", "document id must be a string, got tuple ('a', 'b')"),
        ({"q": {"d 1": 1.0}}, "run['q']", "document id 'd 1' contains ' '"),
        ({"q": [("d", 1.0), ("e", None)]}, "run['q']", "rank 2: score must be a number, got None"),
    ],
)
def test_bad_scores_and_ids_in_a_dict_run_are_refused_naming_where_they_are(run, field, reason):
    with pytest.raises(InputError) as err:
        retbench.evaluate({"q": {"d": 1}}, run, ["mrr"])
    assert err.value.field == field and err.value.reason.startswith(reason)


@pytest.mark.parametrize(
    ("grade", "reason"),
    [
        (0.5, "grade must be an integer, got 0.5"),
        (float("nan"), "grade must be an integer, got nan"),
        (None, "grade must be an integer, got None"),
        (True, "grade must be an integer, got True"),
        (2**64, "grade out of range (grades must fit in 64 bits)"),
    ],
)
def test_a_grade_a_qrels_file_could_not_hold_is_refused_in_a_dict_with_the_files_message(tmp_path, grade, reason):
    with pytest.raises(InputError) as err:
        retbench.evaluate({"q": {"d": 1, "e": grade}}, {"q": {"d": 1.0}}, ["mrr"])
    assert err.value.field == "qrels['q']['e']" and err.value.reason.startswith(reason)
    if grade is not None and not isinstance(grade, bool):
        path = tmp_path / "qrels.txt"
        path.write_text(f"q 0 d 1\nq 0 e {grade}\n")
        with pytest.raises(InputError) as from_file:
            retbench.evaluate(path, {"q": {"d": 1.0}}, ["mrr"])
        assert from_file.value.reason.split(", got")[0] == err.value.reason.split(", got")[0]


def test_integer_and_integral_float_grades_are_still_taken_and_text_grades_are_not():
    assert retbench.evaluate({"q": {"d": 1.0, "e": np.int64(2)}}, {"q": {"e": 1.0}}, ["mrr"]).means() == {"mrr": 1.0}
    with pytest.raises(InputError, match=r"grade must be an integer, got '2' \(text\)"):
        retbench.evaluate({"q": {"d": 1.0, "e": "2"}}, {"q": {"e": 1.0}}, ["mrr"])


def test_dataframe_rows_with_nan_or_none_are_refused_naming_column_and_row():
    qrels = {"q": {"d": 1}}
    cases = [
        (pd.DataFrame({"qid": ["q", "q"], "docno": ["d", "e"], "score": [1.0, None]}), "score[1]", "score must be"),
        (pd.DataFrame({"qid": ["q", None], "docno": ["d", "e"], "score": [1.0, 2.0]}), "qid[1]", "query id must be"),
        (pd.DataFrame({"qid": ["q", "q"], "docno": ["d", np.nan], "score": [1.0, 2.0]}), "docno[1]", "document id"),
    ]
    for frame, field, reason in cases:
        with pytest.raises(InputError) as err:
            retbench.evaluate(qrels, frame, ["mrr"])
        assert err.value.field == field and err.value.reason.startswith(reason)
    bad_grades = pd.DataFrame({"qid": ["q", "q"], "docno": ["d", "e"], "label": [1, np.nan]})
    with pytest.raises(InputError, match=r"field 'label\[1\]': grade must be an integer, got nan"):
        retbench.evaluate(bad_grades, {"q": {"d": 1.0}}, ["mrr"])
    # integer ids in a frame (a BEIR table read by pandas) are still ids
    ints = pd.DataFrame({"qid": [1, 1], "docno": [7, 8], "score": [2.0, 1.0]})
    assert retbench.evaluate({"1": {"8": 1}}, ints, ["mrr"]).means() == {"mrr": 0.5}


# -- what ranx and pytrec_eval users bring ------------------------------------------------------------
def test_ranx_qrels_and_runs_score_like_the_dicts_they_hold():
    ranx = pytest.importorskip("ranx")
    qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    run_a = {"q1": {"d2": 3.0, "d1": 2.0, "d9": 1.0}, "q2": {"d3": 0.5}}
    run_b = {"q1": {"d1": 3.0, "d2": 2.0}, "q2": {"d8": 0.5, "d3": 0.25}}
    expected = retbench.evaluate(qrels, run_a, NAMES).means()
    ev = retbench.evaluate(ranx.Qrels(qrels), ranx.Run(run_a, name="bm25"), NAMES)
    assert ev.means() == pytest.approx(expected, abs=1e-12) and ev.system == "bm25"
    # ranx.compare takes a list of named runs; so does retbench.compare
    runs = [ranx.Run(run_a, name="bm25"), ranx.Run(run_b, name="dense")]
    cmp = retbench.compare(runs, ranx.Qrels(qrels), ["mrr"], n_resamples=100)
    assert [(p.system_a, p.system_b) for p in cmp.pairs] == [("bm25", "dense")]
    assert cmp.pair("bm25", "dense").metric("mrr").delta == pytest.approx(
        retbench.evaluate(qrels, run_b, ["mrr"]).mean("mrr") - expected["mrr"]
    )
    with pytest.raises(InputError, match="score must be finite"):
        retbench.evaluate(ranx.Qrels(qrels), ranx.Run({"q1": {"d1": float("nan")}}), ["mrr"])


def test_pytrec_eval_measure_families_mean_trec_evals_default_cutoffs():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {"q1": {"d1": 2, "d2": 0, "d5": 1}, "q2": {"d3": 1, "d4": 3}}
    run = {"q1": {"d2": 3.0, "d1": 2.0, "d9": 1.0, "d5": 0.5}, "q2": {"d4": 0.75, "d7": 0.5, "d3": 0.25}}
    families = {"ndcg_cut", "P", "recall", "map_cut", "success"}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, families).evaluate(run)
    ev = retbench.evaluate(qrels, run, families)
    assert len(ev.metrics) == 4 * 9 + 3
    for trec_name, name in zip(ev.trec_names, ev.metrics, strict=True):
        col = dict(zip(ev.query_ids, ev.column(name).tolist(), strict=True))
        for qid in qrels:
            assert col[qid] == pytest.approx(theirs[qid][trec_name], abs=1e-9), (trec_name, qid)
    assert ev.metrics[:3] == ["P@5", "P@10", "P@15"]  # a set is taken in sorted order
    assert retbench.evaluate(qrels, run, "ndcg_cut").metrics[-1] == "ndcg@1000"
    assert retbench.evaluate(qrels, run, ["P@10", "ndcg"]).metrics == ["P@10", "ndcg"]  # one name, one metric


def test_run_from_dict_itself_holds_rankings_to_a_run_files_rules():
    with pytest.raises(InputError) as err:
        Run.from_dict({"q": {"d": 1.0, "e": float("inf")}})
    assert err.value.field == "run['q']['e']" and err.value.reason == "score must be finite, got inf"
    with pytest.raises(InputError, match="query id must be a string, got float nan"):
        Run.from_dict({float("nan"): {"d": 1.0}})
    assert Run.from_dict({"q": {7: 2.0, "d": 1.0}}).docs("q") == ["7", "d"]  # integer ids are their digits
