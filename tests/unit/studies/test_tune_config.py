"""A tuning config is checked whole before any setting is searched: every grid setting is validated as the
experiment's loader validates a system, and a bad one is named at its line in the tune file (not at a
`systems[1]` of the experiment file, which the derived experiment has and the user's file does not)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from retbench.cli import app
from retbench.errors import ConfigError, InputError
from retbench.studies.tune import load_config

EXPERIMENT = """\
name: t
metrics: [ndcg@10]
datasets: [{name: scifact, split: test, max_queries: 40, corpus_sample: 300}]
systems:
  - name: hybrid
    adapter: hybrid
    params:
      fusion: rrf
      components:
        - {name: a, adapter: bm25s}
        - {name: b, adapter: bm25s, params: {k1: 0.9}}
"""


def _write(tmp_path: Path, grid: str, experiment: str = EXPERIMENT, folds: int = 4) -> Path:
    (tmp_path / "exp.yaml").write_text(experiment)
    path = tmp_path / "tune.yaml"
    path.write_text(
        f"experiment: exp.yaml\nsystem: hybrid\nmetric: ndcg@10\nfolds: {folds}\noutput: {tmp_path / 'out'}\n"
        f"grid:\n{grid}"
    )
    return path


@pytest.mark.parametrize(
    ("grid", "line", "field", "words"),
    [
        (  # the third setting's value is bad: its own line and key, after two good settings
            "  - {params.rrf_k: 10}\n  - {params.rrf_k: 30}\n  - {params.rrf_k: -60}\n",
            9,
            "grid[2].params.rrf_k",
            "must be in [0, 1e+06], got -60",
        ),
        (
            "  - {params.fusion: wsum, params.weights: [.nan, 1]}\n",
            7,
            "grid[0].params.weights",
            "[0]: must be a finite number",
        ),
        (  # the setting's fusion with weights it also sets: blamed on the key that set the weights
            "  - {params.fusion: combmnz, params.weights: [1, 2]}\n",
            7,
            "grid[0].params.weights",
            "combmnz takes no weights",
        ),
        (  # a mapping grid: the alternative's own line
            "  params.rrf_k:\n    - 10\n    - .inf\n",
            9,
            "grid.params.rrf_k[1]",
            "finite",
        ),
        (
            "  - {params.components.0.params.k1: 1.0e+308}\n",
            7,
            "grid[0].params.components.0.params.k1",
            "must be <= 100.0",
        ),
    ],
)
def test_a_bad_grid_setting_is_refused_at_its_tune_file_line_before_any_setting_runs(
    tmp_path: Path, grid: str, line: int, field: str, words: str
) -> None:
    path = _write(tmp_path, grid)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field), str(err.value)
    assert words in str(err.value) and "(setting " in str(err.value)
    res = CliRunner().invoke(app, ["tune", str(path)])
    assert res.exit_code == 2 and res.output.startswith(f"error: {path}:{line}: field '{field}'"), res.output
    assert not (tmp_path / "out").exists()  # nothing ran


def test_weights_the_system_gives_with_a_fusion_the_setting_picks_blame_the_setting(tmp_path: Path) -> None:
    experiment = EXPERIMENT.replace("fusion: rrf", "fusion: wsum\n      weights: [1, 2]")
    path = _write(tmp_path, "  - {params.fusion: combmnz}\n", experiment)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (err.value.line, err.value.field) == (7, "grid[0]") and "params.weights: combmnz takes no weights" in str(
        err.value
    )


def test_the_system_as_written_is_blamed_in_the_experiment_file_at_its_own_index(tmp_path: Path) -> None:
    experiment = EXPERIMENT.replace("systems:\n", "systems:\n  - {name: other, adapter: bm25s}\n").replace(
        "fusion: rrf", "fusion: rrf\n      rrf_k: -1"
    )
    path = _write(tmp_path, "  - {params.rrf_k: 10}\n", experiment)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.path == str(tmp_path / "exp.yaml") and err.value.field == "systems[1].params.rrf_k"
    assert err.value.line == 10


def test_too_few_queries_for_the_folds_are_refused_before_any_setting_is_searched(tmp_path: Path) -> None:
    path = _write(tmp_path, "  - {params.rrf_k: 10}\n", folds=5)
    with pytest.raises(InputError, match="--max-queries 3 cannot make 5 folds"):
        load_config(path, max_queries=3)
    path = _write(tmp_path, "  - {params.rrf_k: 10}\n", EXPERIMENT.replace("max_queries: 40", "max_queries: 4"), 5)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (err.value.field, err.value.line) == ("folds", 4)
    res = CliRunner().invoke(app, ["tune", str(path), "--max-queries", "2"])
    assert res.exit_code == 2 and "cannot make 5 folds" in res.output and not (tmp_path / "out").exists()
