"""The one config loader: every kind names file:line and field, secrets and model files are checked before any
work, paths are read from the config's folder, and depth must reach every metric's cutoff."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import get_args

import pytest
import yaml
from typer.testing import CliRunner

from repo_paths import SRC
from retbench.cli import app
from retbench.config import EncoderSettings, LoadSettings
from retbench.config.common import JoinRule
from retbench.config.experiment import JudgingBlock
from retbench.config.judge import load_judge
from retbench.criteria import load_criteria
from retbench.errors import ConfigError
from retbench.results import read_results
from retbench.secrets import redact
from retbench.studies.benchmark import load_config, parse_config
from retbench.studies.labels.calibrate import load_calibration
from retbench.studies.stress import parse_config as parse_stress

runner = CliRunner()


def tiny_beir(root: Path) -> Path:
    """A three-query BEIR folder written by hand."""
    root.mkdir(parents=True)
    docs = {"d1": "tomatoes need full sun", "d2": "roses are pruned in late winter", "d3": "bread needs flour"}
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in docs.items()))
    queries = {"q1": "when are roses pruned", "q2": "what does bread need", "q3": "what do tomatoes need"}
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries.items()))
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td3\t1\nq3\td1\t1\n")
    return root


def one_line_error(res: object, *needles: str) -> str:
    out = res.output.strip()  # type: ignore[attr-defined]
    assert res.exit_code == 2, out  # type: ignore[attr-defined]
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    for n in needles:
        assert n in out, (n, out)
    return out


# -- file:line for every kind ------------------------------------------------------------------------
def test_a_judge_config_typo_names_file_line_and_the_nearest_key(tmp_path: Path) -> None:
    path = tmp_path / "judge.yaml"
    path.write_text("# a judge\njudge:\n  base_url: http://127.0.0.1:9\n  temprature: 0\n")
    with pytest.raises(ConfigError) as err:
        load_judge(path)
    assert str(err.value).startswith(f"{path}:4: field 'judge.temprature': unknown key 'temprature'")
    assert "did you mean 'temperature'?" in str(err.value)


def test_a_calibration_config_typo_names_file_line_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "cal.yaml"
    path.write_text("dataset: scifact\njudge:\n  base_url: http://127.0.0.1:9\nsample:\n  relevnt: 3\n")
    res = runner.invoke(app, ["judge-calibrate", str(path)])
    one_line_error(res, f"{path}:5: field 'sample.relevnt'", "did you mean 'relevant'?")


def test_a_criteria_file_typo_names_file_line_and_the_nearest_key(tmp_path: Path) -> None:
    path = tmp_path / "criteria.yaml"
    path.write_text("alpha: 0.05\ngates:\n  - name: r5\n    metric: recall@5\n    threshold: 0.7\n    severty: error\n")
    with pytest.raises(ConfigError) as err:
        load_criteria(path)
    assert str(err.value).startswith(f"{path}:6: field 'gates[0].severty': unknown key 'severty'")
    assert "did you mean 'severity'?" in str(err.value)


def test_a_choice_error_lists_the_valid_choices(tmp_path: Path) -> None:
    raw = {"datasets": ["scifact"], "systems": [{"adapter": "bm25s"}], "evaluation": {"mode": "trec-eval"}}
    with pytest.raises(ConfigError, match=r"field 'evaluation.mode': must be one of 'trec_eval' or 'pytrec_eval'"):
        parse_config(raw, "x.yaml")


def test_ingest_impact_strings_for_numbers_and_a_bad_join_rule_are_one_line_errors(tmp_path: Path) -> None:
    base = "candidates: [{kind: holdout, n: 2}]\n"
    cases = {
        "seed: '3'\n": ("seed", "must be an integer, got '3'"),
        "context_recall: {references: gold_documents, threshold: '0.8'}\n": (
            "context_recall.threshold",
            "must be a number",
        ),
        "dataset: {name: scifact, join_rule: titles}\n": ("dataset.join_rule", "'title_space_text'"),
        "candidates: [{kind: holdout, n: 2, seed: x}]\n": ("candidates[0].seed", "must be an integer"),
        "candidates: [{kind: holdot, n: 2}]\n": ("candidates[0].kind", "'holdout'"),
    }
    for extra, (fld, words) in cases.items():
        path = tmp_path / "ingest.yaml"
        path.write_text(extra + base if not extra.startswith("candidates") else extra)
        res = runner.invoke(app, ["ingest-impact", str(path)])
        one_line_error(res, f"{path}:1: field '{fld}'", words)


# -- depth and metric cutoffs --------------------------------------------------------------------------
def test_depth_below_a_metric_cutoff_is_refused_at_config_time(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(
        "datasets: [scifact]\ndepth: 10\nmetrics: [recall@10, recall@100]\nsystems: [{adapter: bm25s}]\n"
        f"output: {tmp_path / 'out'}\n"
    )
    res = runner.invoke(app, ["run", str(path), "--quiet"])
    one_line_error(res, f"{path}:2: field 'depth'", "recall@100", "at least 100")
    assert not (tmp_path / "out").exists()


def test_a_depth_below_10_without_a_reference_block_is_accepted(tmp_path: Path) -> None:
    cfg = parse_config(
        {"datasets": ["scifact"], "depth": 5, "metrics": ["ndcg@5", "recall@3"], "systems": [{"adapter": "bm25s"}]},
        "x.yaml",
    )
    assert cfg.depth == 5 and cfg.reference is None
    stress = parse_stress(
        {"datasets": ["scifact"], "depth": 3, "metrics": ["recall@3"], "systems": [{"adapter": "bm25s"}]}, "s.yaml"
    )
    assert stress.k == 3
    with pytest.raises(ConfigError, match=r"field 'reference.k': must not exceed depth \(5\)"):
        parse_config(
            {
                "datasets": ["scifact"],
                "depth": 5,
                "metrics": ["ndcg@5"],
                "systems": [{"name": "a", "adapter": "bm25s"}, {"name": "b", "adapter": "bm25s"}],
                "reference": "a",
            },
            "x.yaml",
        )


# -- secrets named by *_env ------------------------------------------------------------------------------
def test_a_missing_env_variable_is_refused_before_any_system_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RB_TEST_UNSET_TOKEN", raising=False)
    data = tiny_beir(tmp_path / "data")
    body = {
        "output": str(tmp_path / "out"),
        "datasets": [{"path": str(data)}],
        "metrics": ["ndcg@3"],
        "depth": 3,
        "systems": [
            {"name": "bm25", "adapter": "bm25s"},
            {
                "name": "api",
                "adapter": "http",
                "params": {"url": "http://127.0.0.1:9/s", "auth_env": "RB_TEST_UNSET_TOKEN"},
            },
        ],
    }
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    res = runner.invoke(app, ["run", str(path), "--quiet"])
    line = yaml.safe_dump(body, sort_keys=False).splitlines().index("    auth_env: RB_TEST_UNSET_TOKEN") + 1
    one_line_error(res, f"{path}:{line}: field 'systems[1].params.auth_env'", "'RB_TEST_UNSET_TOKEN' is not set")
    assert not (tmp_path / "out").exists()  # the first system never ran


def test_every_env_value_the_loader_reads_is_registered_for_redaction(tmp_path: Path, monkeypatch) -> None:
    secret = "s3cr3t-from-the-loader-7d1f"
    monkeypatch.setenv("RB_TEST_LOADER_SECRET", secret)
    path = tmp_path / "x.yaml"
    path.write_text(
        "datasets: [scifact]\nsystems:\n  - adapter: http\n    params:\n      url: http://127.0.0.1:9/s\n"
        "      headers_env: {X-Api-Key: RB_TEST_LOADER_SECRET}\n"
    )
    load_config(path)
    assert redact(f"upstream said {secret}") == "upstream said ***"


# -- paths -----------------------------------------------------------------------------------------------
def test_a_relative_judge_model_file_is_read_from_the_config_folder_whatever_the_cwd(
    tmp_path: Path, monkeypatch
) -> None:
    folder = tmp_path / "project" / "configs"
    (folder / "models").mkdir(parents=True)
    (folder / "models" / "judge.gguf").write_bytes(b"GGUF")
    path = folder / "judge.yaml"
    path.write_text("judge:\n  base_url: http://127.0.0.1:9\n  model_file: models/judge.gguf\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    settings, _ = load_judge(path)
    assert settings.model_path() == folder / "models" / "judge.gguf"
    monkeypatch.chdir(folder)
    assert load_judge("judge.yaml")[0].model_path().samefile(folder / "models" / "judge.gguf")  # type: ignore[union-attr]


def test_a_model_file_is_also_found_in_the_cache_and_a_missing_one_names_file_line(tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("RETBENCH_CACHE", str(cache))
    path = tmp_path / "cal.yaml"
    path.write_text("judge:\n  local: {model_file: .retbench-cache/models/m.gguf}\n")
    assert load_calibration(path).judge.model_path() == cache / "models" / "m.gguf"
    path.write_text("judge:\n  local:\n    model_file: models/missing.gguf\n")
    with pytest.raises(ConfigError) as err:
        load_calibration(path)
    assert str(err.value).startswith(f"{path}:3: field 'judge.local.model_file': model file not found")
    assert str(tmp_path / "models" / "missing.gguf") in str(err.value)


def test_a_dataset_path_is_read_from_the_config_folder(tmp_path: Path, monkeypatch) -> None:
    tiny_beir(tmp_path / "cfg" / "data")
    path = tmp_path / "cfg" / "x.yaml"
    path.write_text(
        f"output: {tmp_path / 'out'}\ndatasets: [{{path: data}}]\ndepth: 3\nmetrics: [ndcg@3]\n"
        "systems: [{adapter: bm25s}]\n"
    )
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["run", str(path), "--quiet"])
    assert res.exit_code == 0, res.output
    assert read_results(tmp_path / "out")["bm25s"].metrics["ndcg@3"].value > 0


def test_ingest_impact_candidate_and_reference_files_are_read_from_the_config_folder(
    tmp_path: Path, monkeypatch
) -> None:
    from retbench.studies.impact import load_ingest_config

    folder = tmp_path / "cfg"
    folder.mkdir()
    path = folder / "ingest.yaml"
    path.write_text("candidates: [{kind: file, path: new/corpus.jsonl}]\ncontext_recall: {references: answers.jsonl}\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_ingest_config(path)
    assert getattr(cfg.candidates[0], "path", None) == str(folder / "new" / "corpus.jsonl")
    assert cfg.context_recall is not None and cfg.context_recall.references == str(folder / "answers.jsonl")


# -- declarations that mirror code elsewhere stay in step ------------------------------------------------
def test_declared_choices_match_the_code_they_describe() -> None:
    from retbench.data import JOIN_RULES
    from retbench.retrievers.encoders import Encoder
    from retbench.studies.judging import PROMPTS
    from retbench.studies.stress.validate import FAILURE_OUTCOMES

    params = [n for n in inspect.signature(Encoder.__init__).parameters if n != "self"]
    assert sorted(EncoderSettings.model_fields) == sorted(params)
    assert set(get_args(JoinRule)) == set(JOIN_RULES)
    prompt_kinds = get_args(get_args(JudgingBlock.model_fields["prompts"].annotation)[0])
    assert set(prompt_kinds) == set(PROMPTS)
    retry_on = get_args(get_args(LoadSettings.model_fields["retry_on"].annotation)[0])
    assert set(retry_on) == set(FAILURE_OUTCOMES)


def test_the_config_package_imports_nothing_above_its_layer() -> None:
    above = ("retbench.retrievers", "retbench.studies", "retbench.report", "retbench.cli", "retbench.llm")
    for path in (SRC / "retbench" / "config").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert not name.startswith(above), f"{path.name} imports {name}"
