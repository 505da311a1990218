"""Plugins: the README's under-30-line adapter (examples/plugin_adapter.py), found by `module:factory`
in a config and by the `retbench.retrievers` entry point of an installed distribution."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from repo_paths import EXAMPLES
from retbench.errors import ConfigError
from retbench.retrievers.base import available, create, resolve_factory
from stored import flat
from stores_support import ENC, SCIFACT, SLICE, assert_same_ranking, scifact_slice


@pytest.fixture
def on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("plugin_adapter", None)


def test_the_readme_adapter_is_short_and_complete():
    lines = (EXAMPLES / "plugin_adapter.py").read_text().splitlines()
    assert len(lines) < 30


def test_plugin_by_module_factory_matches_faiss_flat(on_path):
    corpus, queries, _ = scifact_slice()
    plugin = create("plugin_adapter:NumpyCosine", {"max_seq_length": ENC["max_seq_length"]}, name="mine")
    assert plugin.name == "mine"
    plugin.index(corpus)
    flat = create("dense", {"index": "flat_ip", **ENC})
    flat.index(corpus)
    mine, ref = plugin.search(queries, 10), flat.search(queries, 10)
    assert mine.failed() == []
    for q in queries:
        assert_same_ranking(mine.ranking(q), ref.ranking(q))
    with pytest.raises(ConfigError, match="unknown parameter 'nprobe' for adapter 'plugin_adapter:NumpyCosine'"):
        create("plugin_adapter:NumpyCosine", {"nprobe": 4})


def test_plugin_in_an_experiment_config(on_path, tmp_path):
    from retbench.studies.benchmark import load_config, run_experiment

    cfg = {
        "name": "plugin",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": SCIFACT, **SLICE}],
        "systems": [
            {"name": "faiss", "adapter": "dense", "params": {"index": "flat_ip", **ENC}},
            {
                "name": "mine",
                "adapter": "plugin_adapter:NumpyCosine",
                "params": {"max_seq_length": ENC["max_seq_length"]},
            },
        ],
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    outcome = run_experiment(load_config(tmp_path / "cfg.yaml"), log=lambda m: None)
    assert not outcome.backend_failed
    metrics = flat(tmp_path / "out")
    assert metrics["mine"]["ndcg@10"] == pytest.approx(metrics["faiss"]["ndcg@10"], abs=1e-9)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["systems"]["mine"]["adapter"] == "plugin_adapter:NumpyCosine"


def test_plugin_by_entry_point(on_path, tmp_path, monkeypatch):
    """An installed distribution that declares `[project.entry-points."retbench.retrievers"]`."""
    dist = tmp_path / "site" / "my_retriever-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-retriever\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[retbench.retrievers]\nnumpy-cosine = plugin_adapter:NumpyCosine\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert "numpy-cosine" in available()
    factory = resolve_factory("numpy-cosine")
    assert factory.__name__ == "NumpyCosine"
    r = create("numpy-cosine", {"max_seq_length": 128})
    corpus, queries, _ = scifact_slice()
    r.index(corpus.subset(corpus.ids[:40]))
    assert len(r.search(queries, 5).answered()) == len(queries)


def test_missing_plugin_is_a_config_error():
    with pytest.raises(ConfigError, match="cannot import module 'no_such_plugin'"):
        resolve_factory("no_such_plugin:Thing")
