"""Start-up: what `retbench eval` on a small run and `retbench --help` import, listed module by module.

Scripts that score many small runs (per fold, per topic, in CI loops) pay the start-up on every call, so the
commands import only what they use: `retbench.cli` builds a command when it is invoked (`COMMANDS`), a TREC
file under `io.trec.SMALL_FILE_BYTES` is read line by line without pyarrow, and heavy libraries are imported
inside the functions that need them. The CPU figures are benchmarks/startup.py's (benchmarks/RESULTS.md); these
tests hold the cause, the module list, without timing anything; and the CLI's one setting for NumPy's BLAS
(`retbench.cli.BLAS_SPIN`: OpenBLAS's idle worker otherwise busy-waits about 0.05 CPU s at every start).

Typer itself is the one exception the lists allow: `typer.main` imports `typer.completion` (and shellingham) on
`import typer`, and Typer converts every option's value with a pydantic TypeAdapter (pydantic and
importlib.metadata are imported by the first value converted), whichever command runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import retbench.cli
from loaded_modules import cli_modules, modules_after

#: what `retbench eval` on a TREC run and qrels never needs, with the reason it is not needed
NOT_FOR_EVAL = {
    "pandas": "DataFrames are one input form of the Python API, not of a file",
    "torch": "models belong to retrievers and judges",
    "sentence_transformers": "models belong to retrievers and judges",
    "transformers": "models belong to retrievers and judges",
    "faiss": "indexes belong to retrievers",
    "scipy": "the statistics are NumPy's",
    "pyarrow": "a file under 32 KiB is read line by line (its dataset layer is never needed)",
    "yaml": "golden sets and configs only",
    "httpx": "LLM judges and HTTP stores only",
    "rich.progress": "progress bars are for long runs",
    "retbench.results": "the results folder of a study",
    "retbench.studies": "studies",
    "retbench.config": "config files",
    "retbench.retrievers": "retrieval",
    "retbench.llm": "LLM judges",
    "retbench.comparison": "A/B comparison",
    "retbench.gates": "ship criteria",
    "retbench.io.golden": "golden sets",
    "retbench.io.outputs": "system outputs in the golden-set format",
    "retbench.io.datasets": "dataset folders and names",
    "retbench.io.run_columns": "columnar run files (a TREC run is told apart by its first bytes)",
}


def _other_commands(kept: str) -> set[str]:
    """The command modules of `retbench.cli` other than `kept` (the shared `app` and the package's own are not)."""
    folder = Path(retbench.cli.__file__).parent
    return {f"retbench.cli.{p.stem}" for p in folder.glob("*.py")} - {
        f"retbench.cli.{name}" for name in ("__init__", "__main__", "app", kept)
    }


@pytest.mark.parametrize(
    ("fmt", "shows"), [("table", "│ mrr    │ 0.5000 │"), ("trec", "\tall\t0.5000")], ids=["table", "trec"]
)
def test_eval_on_a_small_trec_run_imports_only_what_it_uses(tmp_path, fmt, shows):
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 0\n")
    (tmp_path / "run.trec").write_text("q1 Q0 d2 1 2.0 sys\nq1 Q0 d1 2 1.0 sys\n")
    probe = cli_modules(["eval", "qrels.txt", "run.trec", "-m", "mrr", "-f", fmt], tmp_path)
    assert probe.exit_code == 0, probe.stderr
    assert shows in probe.stdout  # the command really scored the run
    loaded = probe.loaded(set(NOT_FOR_EVAL))
    assert loaded == [], "\n".join(f"{name}: {NOT_FOR_EVAL[name]}" for name in loaded)
    assert probe.loaded(_other_commands("evaluate")) == []  # other commands are not even built
    assert {"numpy", "retbench.cli.evaluate", "retbench.evaluation"} <= probe.modules


def test_help_lists_every_command_without_numpy_pydantic_or_rich(tmp_path):
    probe = cli_modules(["--help"], tmp_path)
    assert probe.exit_code == 0, probe.stderr
    listed = [line.split()[0] for line in probe.stdout.split("Commands:", 1)[1].splitlines() if line.strip()]
    assert listed == list(retbench.cli.COMMANDS)  # every entry of the table resolves, in the table's order
    assert probe.loaded(["numpy", "pydantic", "rich", "pyarrow", "pandas", "yaml"]) == []


@pytest.mark.parametrize(("given", "kept"), [(None, "20"), ("28", "28")])
def test_the_cli_shortens_openblas_idle_spin_unless_the_person_set_it(tmp_path, given, kept):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if given is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = given
    code = (
        "import os, sys\nsys.argv = ['retbench', '--help']\nfrom retbench.cli import main\n"
        "try:\n    main()\nfinally:\n    print('spin', os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"
    )
    probe = modules_after(code, tmp_path, env=env)
    assert probe.exit_code == 0 and probe.stdout.split()[-2:] == ["spin", kept]
    assert "numpy" not in probe.modules  # set before anything loads OpenBLAS
