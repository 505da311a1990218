"""The adapter registry: built-in names, parameter checking, entry points, `module:factory`, lazy imports."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from loaded_modules import modules_after
from retbench.data import Corpus, Queries
from retbench.errors import ConfigError
from retbench.retrievers import Retriever, available, create
from retbench.retrievers import base as registry
from retbench.retrievers.bm25 import BM25SRetriever, RankBM25Retriever
from retbench.retrievers.dense import DenseRetriever
from retbench.retrievers.hybrid import HybridRetriever

TOY_MODULE = '''
from retbench.retrievers.base import Retriever


class Echo(Retriever):
    """Returns the documents whose text contains the query, scored by position."""

    adapter = "echo"

    def __init__(self, boost: float = 1.0, name=None):
        super().__init__(name)
        self.boost = boost

    def index(self, corpus):
        self.docs = list(zip(corpus.ids, corpus.texts))

    def search_one(self, text, k):
        hits = [d for d, t in self.docs if text in t]
        return [(d, self.boost / (i + 1)) for i, d in enumerate(hits[:k])]


def make(boost: float = 1.0, name=None):
    return Echo(boost, name)


def not_a_retriever():
    return 42
'''


@pytest.fixture
def toy_module(tmp_path, monkeypatch):
    (tmp_path / "retbench_toy_plugin.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "retbench_toy_plugin"


CORPUS = Corpus(["a", "b", "c"], ["red apple", "green apple", "red cherry"])


def test_builtin_names_resolve_to_their_classes():
    assert {"bm25s", "rank_bm25", "dense", "hybrid"} <= set(available())
    assert registry.resolve_factory("bm25s") is BM25SRetriever
    assert registry.resolve_factory("rank_bm25") is RankBM25Retriever
    assert registry.resolve_factory("dense") is DenseRetriever
    assert registry.resolve_factory("hybrid") is HybridRetriever


@pytest.mark.parametrize("adapter", ["bm25s", "rank_bm25", "dense", "hybrid"])
def test_unknown_parameters_name_the_valid_ones(adapter):
    with pytest.raises(ConfigError) as err:
        create(adapter, {"no_such_knob": 1}, where="exp.yaml")
    assert "unknown parameter 'no_such_knob'" in str(err.value) and "exp.yaml" in str(err.value)
    assert err.value.field == "params.no_such_knob"


def test_bad_values_are_config_errors_with_the_adapters_reason():
    with pytest.raises(ConfigError, match="bm99"):
        create("bm25s", {"method": "bm99"})
    with pytest.raises(ConfigError, match="stemmer"):
        create("rank_bm25", {"stemmer": "klingon"})
    with pytest.raises(ConfigError, match="ef_search"):
        create("dense", {"index": "hnsw", "ef_search": 0})


def test_name_is_set_and_carried_into_the_run():
    r = create("bm25s", {"stopwords": None, "stemmer": None}, name="lexical")
    r.index(CORPUS)
    run = r.search(Queries({"q": "red"}), 5)
    assert r.name == "lexical" and run.name == "lexical"
    assert set(run.docs("q")) == {"a", "c"}
    assert create("rank_bm25").name == "rank_bm25"


def test_unknown_adapter_lists_the_available_ones():
    with pytest.raises(ConfigError, match=r"available: .*bm25s"):
        create("bm26")


def test_module_factory_path(toy_module):
    r = create(f"{toy_module}:make", {"boost": 2.0}, name="echo")
    assert isinstance(r, Retriever) and r.name == "echo"
    r.index(CORPUS)
    assert r.search(Queries({"q": "apple"}), 5).ranking("q") == [("a", 2.0), ("b", 1.0)]
    assert create(f"{toy_module}:Echo").adapter == "echo"  # a class is a factory too
    with pytest.raises(ConfigError, match="unknown parameter 'boots'"):
        create(f"{toy_module}:make", {"boots": 2})
    with pytest.raises(ConfigError, match="not a Retriever"):
        create(f"{toy_module}:not_a_retriever")
    with pytest.raises(ConfigError, match="no attribute"):
        create(f"{toy_module}:missing")
    with pytest.raises(ConfigError, match="cannot import"):
        create("no_such_module_xyz:make")


def test_entry_point_adapters(toy_module, monkeypatch):
    ep = EntryPoint(name="echo", value=f"{toy_module}:make", group="retbench.retrievers")

    def fake_entry_points(group: str):
        return [ep] if group == "retbench.retrievers" else []

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    assert "echo" in available()
    r = create("echo", {"boost": 3.0})
    r.index(CORPUS)
    assert r.search_batch(["cherry"], 5) == [[("c", 3.0)]]


def test_hybrid_components_may_be_user_adapters(toy_module):
    r = create(
        "hybrid", {"components": [{"adapter": f"{toy_module}:make"}, {"adapter": "bm25s", "params": {"stemmer": None}}]}
    )
    r.index(CORPUS)
    assert r.search_batch(["apple"], 3)[0][0][0] in {"a", "b"}
    assert r.capabilities == frozenset()  # the toy adapter declares no optional abilities


def test_adapter_modules_import_without_heavy_libraries(tmp_path):
    code = "import retbench.retrievers.encoders, retbench.retrievers.bm25, retbench.retrievers.dense, retbench.retrievers.hybrid"
    heavy = ["torch", "sentence_transformers", "faiss", "bm25s", "rank_bm25", "Stemmer", "transformers"]
    assert modules_after(code, tmp_path).loaded(heavy) == []


@pytest.mark.parametrize("adapter", ["chroma", "qdrant", "pgvector", "lancedb", "milvus", "typesense"])
def test_every_vector_store_takes_the_dense_encoder_parameters_and_names_a_misspelt_one(adapter):
    from retbench.retrievers.base import check_params, resolve_factory

    factory = resolve_factory(adapter)
    shared = {"model": "m", "normalize": False, "max_seq_length": 64, "batch_size": 8, "query_prefix": "q: "}
    assert check_params(factory, shared, what=adapter) is not None  # accepted at config time
    with pytest.raises(ConfigError, match="unknown parameter 'modle'") as err:
        create(adapter, {"modle": "x"}, where="exp.yaml")
    assert err.value.field == "params.modle" and "max_seq_length" in str(err.value)
    with pytest.raises(TypeError, match="unexpected parameter 'modle'"):
        factory(modle="x")  # the same check for Python callers
