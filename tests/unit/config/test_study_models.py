"""A study runs on its validated config model: nothing under studies/ or cli/ reads a config's raw mapping.

The loader (`config.study.load_study`, `parse_study`) is the one place a config's data is read and
validated; what it returns is the model (`config.study.Study`), and every block a stage takes (rerank,
generate, judge, executor, faults, ...) is a typed part of it, so no block is parsed twice.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

from repo_paths import CONFIGS, ROOT
from retbench.config import ExperimentModel, StressModel
from retbench.config.calibration import CalibrationModel
from retbench.config.study import Study, parse_study
from retbench.errors import ConfigError

SRC = ROOT / "src" / "retbench"
#: calls that read or validate a config's data: only `config/` makes them
READERS = {"validate", "model_validate", "read_config", "read_yaml", "load_yaml_text", "safe_load", "from_config"}


def _modules() -> list[Path]:
    return sorted([*(SRC / "studies").rglob("*.py"), *(SRC / "cli").rglob("*.py")])


def _called(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_of_the_studies_or_the_cli_reads_or_parses_a_config_mapping(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) in READERS:
            found.append(f"line {node.lineno}: {_called(node)}()")
        elif isinstance(node, ast.Attribute) and node.attr == "raw":
            found.append(f"line {node.lineno}: .raw")
        elif isinstance(node, ast.ImportFrom) and node.module in ("retbench.config", "retbench.config.loader"):
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name in ("load", *READERS)]
    assert not found, f"{path.relative_to(SRC)} reads a config itself; go through config.study.load_study: {found}"


@pytest.mark.parametrize("path", [p for p in _modules() if p.parent.name != "cli"], ids=lambda p: p.name)
def test_a_studys_parse_function_hands_the_mapping_to_the_loader_and_nothing_else(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("parse_")):
        if not fn.args.args or fn.args.args[0].arg not in ("data", "raw"):
            continue
        name = fn.args.args[0].arg
        uses = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name]
        handed = [
            n
            for n in ast.walk(fn)
            if isinstance(n, ast.Call) and _called(n) == "parse_study" and isinstance(n.args[0], ast.Name)
        ]
        assert len(uses) == 1 and [c.args[0].id for c in handed] == [name], f"{path.name}: {fn.name} reads {name}"


def _experiment(**extra) -> dict:
    return {"datasets": ["scifact"], "systems": [{"name": "bm25", "adapter": "bm25s"}], **extra}


def test_the_loader_returns_the_model_located_at_its_file_with_the_output_override(tmp_path: Path) -> None:
    from retbench.studies.benchmark import load_config

    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_experiment(output="here")))
    cfg = load_config(path)
    assert type(cfg) is ExperimentModel and isinstance(cfg, Study)
    assert (cfg.source, cfg.study_name, cfg.output_dir) == (str(path), "exp", Path("here"))
    moved = load_config(path, tmp_path / "elsewhere")
    assert moved.output_dir == tmp_path / "elsewhere" and moved.source == str(path)
    assert parse_study(_experiment(), "<config>", ExperimentModel).output_dir == Path("results") / "<config>"


def test_every_block_a_stage_takes_is_a_typed_part_of_the_model() -> None:
    from retbench.studies.stress import parse_config

    cfg = parse_config(
        {
            **_experiment(metrics=["ndcg_cut_10"], executor="ray"),
            "systems": [
                {
                    "adapter": "bm25s",
                    "faults": {"error_rate": 0.1},
                    "rerank": {"kind": "http", "depth": 10, "url": "http://127.0.0.1:9/rerank"},
                }
            ],
        },
        "s.yaml",
    )
    assert type(cfg) is StressModel and cfg.executor.kind == "ray" and cfg.metric_names == ["ndcg@10"]
    system = cfg.system
    assert system.faults is not None and system.faults.error_rate == 0.1 and system.faults.hang_rate == 0.0
    assert system.rerank is not None and system.rerank.timeout_s == 300.0
    assert system.rerank.params == {"url": "http://127.0.0.1:9/rerank"}
    assert cfg.dataset.label == "scifact" and cfg.k == 100


def test_a_check_after_validation_still_names_the_file_line_and_field(tmp_path: Path) -> None:
    from retbench.studies.benchmark import load_config

    path = tmp_path / "exp.yaml"
    path.write_text("datasets: [scifact]\nsystems:\n  - name: x\n    adapter: bm25s\n    params: {k9: 1}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (err.value.path, err.value.field) == (str(path), "systems[0].params.k9") and ":5:" in str(err.value)


def test_the_resolved_config_fills_in_defaults_and_shows_urls_without_their_credentials() -> None:
    cfg = parse_study(
        _experiment(systems=[{"adapter": "pgvector", "params": {"dsn": "postgresql://u:hunter2@127.0.0.1:9/db"}}]),
        "<config>",
        ExperimentModel,
    )
    resolved = cfg.resolved()
    text = json.dumps(resolved)
    assert "hunter2" not in text and "127.0.0.1:9/db" in resolved["systems"][0]["params"]["dsn"]
    assert resolved["depth"] == 100 and resolved["evaluation"]["relevance_level"] == 1


@pytest.mark.parametrize("name", ["judge-calibration.yaml", "judge-calibration-llamacpp.yaml"])
def test_the_calibration_study_runs_on_its_model(name: str, tmp_path: Path, monkeypatch) -> None:
    from retbench.studies.labels.calibrate import parse_calibration

    data = yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))
    data["judge"] = {"base_url": "http://127.0.0.1:9"}
    cfg = parse_calibration(data, str(tmp_path / name), tmp_path / "out")
    assert type(cfg) is CalibrationModel and cfg.output_dir == tmp_path / "out"
