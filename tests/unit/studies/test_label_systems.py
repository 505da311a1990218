"""`label init --systems CONFIG.yaml`: the config's systems are searched over the study's dataset (a BEIR folder
without qrels) and pooled beside the run files given, in one step; a bad config names its file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from label_gate_data import beir_slice, bm25_runs
from retbench.cli import app
from retbench.errors import ConfigError
from retbench.io.trec import read_run
from retbench.studies.labels.study import init_study, read_study

runner = CliRunner()


@pytest.fixture(scope="module")
def data(scifact, tmp_path_factory) -> tuple[Path, Path]:
    """The slice's folder and a BM25 run file over it (the 'live' system)."""
    tmp = tmp_path_factory.mktemp("systems")
    beir_slice(scifact, tmp / "data")
    live = bm25_runs(tmp / "data", tmp / "runs")[1].rename(tmp / "runs" / "live.trec")
    return tmp / "data", live


def test_a_config_s_systems_are_searched_over_the_dataset_and_pooled_with_the_live_run(data, tmp_path):
    folder, live = data
    config = tmp_path / "systems.yaml"
    config.write_text(
        "datasets: [scifact]\n"  # replaced by the study's dataset, with a note
        "systems:\n  - {name: bm25, adapter: bm25s}\n  - {name: weak, adapter: bm25s, params: {k1: 0.3, b: 0.1}}\n"
    )
    study = tmp_path / "study"
    res = runner.invoke(
        app,
        ["label", "init", str(study), "--dataset", str(folder), "--systems", str(config), "--runs", str(live)],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    assert "its datasets are not used" in res.output
    made = read_study(study)
    assert made.systems == ["bm25", "weak", "live"]
    # the config's bm25 is bm25s over the slice: the same top 10 as bm25s searched directly (bm25_runs' bm25)
    direct = read_run(bm25_runs(folder, tmp_path / "direct")[0], name="bm25")
    pooled = read_run(study / "runs" / "bm25.trec", name="bm25")
    assert pooled.query_ids and all(pooled.docs(q)[:10] == direct.docs(q)[:10] for q in direct.query_ids)
    weak = read_run(study / "runs" / "weak.trec", name="weak")
    assert any(weak.docs(q)[:10] != direct.docs(q)[:10] for q in direct.query_ids)
    for p in made.pairs:
        for name in ("bm25", "weak"):
            top = read_run(study / "runs" / f"{name}.trec", name=name).docs(p["qid"])[:10]
            assert p["pooled_by"].get(name) == (top.index(p["doc_id"]) + 1 if p["doc_id"] in top else None)


def test_a_bad_system_in_the_config_is_one_error_naming_file_line_and_field(data, tmp_path):
    folder, live = data
    config = tmp_path / "bad.yaml"
    config.write_text("systems:\n  - {name: bm25, adapter: bm25s}\n  - {name: b, adapter: bm25s, params: {k9: 1}}\n")
    with pytest.raises(ConfigError) as err:
        init_study(tmp_path / "study", folder, [config, live], note=lambda _: None)
    assert err.value.path == str(config) and err.value.line == 3 and "systems[1]" in str(err.value.field)
    assert not (tmp_path / "study" / "study.json").exists()
