"""An adapter's parameter values are checked when the config loads, so a bad one is refused before the first
system runs (a framework adapter's `timeout_s: 0` used to be refused only when its turn came)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from retbench.cli import app

CONFIG = """\
name: two
output: {out}
metrics: [ndcg@10]
datasets: [{{name: scifact, split: test, max_queries: 3, corpus_sample: 50}}]
systems:
  - {{name: bm25, adapter: bm25s}}
  - name: chain
    adapter: langchain
    params:
      factory: retbench.retrievers.frameworks.langchain_examples:bm25
      {key}: {value}
"""


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("timeout_s", "0", "timeout_s must be positive seconds or null, got 0"),
        ("timeout_s", "-1.5", "got -1.5"),
        ("timeout_s", "'10'", "got '10'"),
        ("concurrency", "0", "concurrency must be a whole number >= 1, got 0"),
    ],
)
def test_a_bad_framework_value_is_one_line_naming_file_line_and_field_before_any_system_runs(
    tmp_path: Path, key: str, value: str, needle: str
) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(CONFIG.format(out=tmp_path / "out", key=key, value=value))
    res = CliRunner().invoke(app, ["run", str(path)])
    out = res.output.strip()
    assert res.exit_code == 2, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert out.startswith(f"error: {path}:11: field 'systems[1].params.{key}': ") and needle in out
    assert not (tmp_path / "out").exists()  # nothing ran, not even the first system
