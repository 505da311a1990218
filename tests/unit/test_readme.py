"""The README's commands are the ones CI runs, and the shipped configs it names exist."""

from __future__ import annotations

import re

from repo_paths import ROOT


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [c.strip() for c in re.findall(r"```bash\n(.*?)```", quick, flags=re.S)]


def test_readme_has_setup_test_and_main_job() -> None:
    setup, test, main_job = readme_commands()
    assert setup == "bash scripts/setup.sh"
    assert "pytest" in test
    assert main_job.startswith(".venv/bin/retbench run ")
    assert (ROOT / main_job.split()[-1]).is_file()


def test_ci_runs_the_readme_commands() -> None:
    setup, test, _ = readme_commands()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert setup in ci and test in ci
    assert ci.index(setup) < ci.index(test)
