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


HYBRID = """\
name: fused
output: {out}
metrics: [ndcg@10]
datasets: [{{name: scifact, split: test, max_queries: 3, corpus_sample: 50}}]
systems:
  - {{name: bm25, adapter: bm25s}}
  - name: hybrid
    adapter: hybrid
    params:
      fusion: {fusion}
      components:
        - {{name: a, adapter: bm25s, params: {{k1: {k1}}}}}
        - {{name: b, adapter: bm25s}}
      {key}: {value}
"""


@pytest.mark.parametrize(
    ("fusion", "key", "value", "field", "needle"),
    [
        ("wsum", "weights", "[.nan, 1]", "weights[0]", "must be a finite number, got nan"),
        ("wsum", "weights", "[1, .inf]", "weights[1]", "must be a finite number, got inf"),
        ("wsum", "weights", "[1.0e+308, 1]", "weights[0]", "must be in [0, 1e+06], got 1e+308"),
        ("wsum", "weights", "[1e308, 1]", "weights[0]", "must be in [0, 1e+06], got '1e308'"),
        ("wsum", "weights", "[x, 1]", "weights[0]", "must be a number, got 'x'"),
        ("wsum", "weights", "[-1, 1]", "weights[0]", "must be in [0, 1e+06], got -1"),
        ("wsum", "weights", "[0, 0]", "weights", "at least one weight must be above 0"),
        ("wsum", "weights", "[1, 1, 1]", "weights", "has 3 entries for 2 rankings"),
        ("combmnz", "weights", "[1, 2]", "weights", "combmnz takes no weights"),
        ("rrf", "rrf_k", "-60", "rrf_k", "must be in [0, 1e+06], got -60"),
        ("rrf", "rrf_k", ".nan", "rrf_k", "must be a finite number"),
        ("rbc", "param", "1.5", "param", "rbc's phi must be in (0, 1), got 1.5"),
        ("rrf", "normalization", "minmux", "normalization", "unknown normalization 'minmux'"),
    ],
)
def test_a_bad_fusion_option_is_refused_naming_file_line_and_field_before_any_system_runs(
    tmp_path: Path, fusion: str, key: str, value: str, field: str, needle: str
) -> None:
    path = tmp_path / "fused.yaml"
    path.write_text(HYBRID.format(out=tmp_path / "out", fusion=fusion, k1=1.2, key=key, value=value))
    res = CliRunner().invoke(app, ["run", str(path)])
    out = res.output.strip()
    assert res.exit_code == 2, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert out.startswith(f"error: {path}:14: field 'systems[1].params.{field}': ") and needle in out, out
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("k1", "needle"),
    [("1.0e+308", "must be <= 100.0, got 1e+308"), ("1e308", "must be <= 100.0, got '1e308'"), (".inf", "finite")],
)
def test_a_bm25_parameter_out_of_its_range_is_refused_before_any_system_runs_even_inside_a_hybrid(
    tmp_path: Path, k1: str, needle: str
) -> None:
    path = tmp_path / "fused.yaml"
    path.write_text(HYBRID.format(out=tmp_path / "out", fusion="rrf", k1=k1, key="rrf_k", value=60))
    res = CliRunner().invoke(app, ["run", str(path)])
    out = res.output.strip()
    assert res.exit_code == 2, out
    assert out.startswith(f"error: {path}:12: field 'systems[1].params.components[0].params.k1': ") and needle in out
    assert not (tmp_path / "out").exists()


def test_a_bm25_system_with_b_above_one_is_refused_with_its_range(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(CONFIG.format(out=tmp_path / "out", key="x", value=1).split("  - name: chain")[0])
    path.write_text(path.read_text().replace("adapter: bm25s}", "adapter: bm25s, params: {b: 2}}"))
    res = CliRunner().invoke(app, ["run", str(path)])
    assert res.exit_code == 2 and f"{path}:6: field 'systems[0].params.b': must be <= 1.0, got 2" in res.output
