"""`retbench label status` reports people's agreement from the label log (Cohen's kappa per two labellers)."""

from __future__ import annotations

from typer.testing import CliRunner

from label_study_data import write_study
from retbench.cli import app
from retbench.studies.labels.log import LabelLog, doc_sha256
from retbench.studies.labels.study import read_study

runner = CliRunner()


def test_status_prints_kappa_for_two_labellers_who_graded_the_same_pairs(tmp_path):
    study = write_study(tmp_path / "study")
    pairs = read_study(study).pairs
    log = LabelLog(study)
    for pair, (a, b) in zip(pairs, [(3, 2), (0, 0), (1, 0), (0, 0)], strict=False):
        shown = {
            "query": pair["query"],
            "doc_sha256": doc_sha256(pair["doc_text"]),
            "llm_hidden": True,
            "highlight": [],
        }
        log.record("grade", pair, "ann", shown, grade=a)
        log.record("grade", pair, "bob", shown, grade=b)
    res = runner.invoke(app, ["label", "status", str(study)])
    assert res.exit_code == 0, res.output
    # relevant (>= 1): ann 1,0,1,0 and bob 1,0,0,0: p_o 3/4, p_e 1/2: kappa 0.5; same grade on 2 of 4
    assert (
        "agreement ann vs bob: Cohen's kappa 0.50 on 4 pairs both graded (relevant = grade >= 1), same grade on 50%"
        in res.output
    )
