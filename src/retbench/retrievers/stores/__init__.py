"""Users' stores: an HTTP retrieval endpoint, vector databases, and plugins.

- `http` (`stores/http.py`): the user's own retrieval service, called once per query.
- `chroma`, `qdrant`, `pgvector`, `lancedb`, `milvus`, `typesense`: vector databases given retbench's own embeddings (the same `Encoder`, model and
  normalization as the `dense` FAISS adapter), so a comparison against FAISS isolates the store.
- Run files (`retrievers/runfile.py`): a system that cannot be called from here, evaluated from its output.
- Plugins: any `Retriever` subclass or factory, named `module:factory` in a config or installed under the
  `retbench.retrievers` entry point group (see `examples/plugin_adapter.py`); `retrievers.base` resolves both.

`VectorStoreRetriever` is what the vector databases share: encoding through the cache, id checks,
and index/add/delete/search on top of a few store-specific primitives. A store that declares the
"filters" ability receives each query's metadata filter (`retrievers/filters.py`) in `_query` and each
document's metadata in `_write`; `servers.py` starts the servers that tests and benchmarks need.
"""

from __future__ import annotations

import os
import re
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retbench.data import Corpus
from retbench.errors import ConfigError, InputError
from retbench.jsontypes import JSONObject, JSONValue
from retbench.retrievers.base import Ranking, Retriever
from retbench.retrievers.encoders import Encoder, create_encoder
from retbench.retrievers.filters import Filter
from retbench.secrets import register


def identifier(text: str) -> str:
    """A table/collection name every store accepts unquoted (lower case [a-z0-9_], at most 63 bytes) from any text."""
    name = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")
    return ("retbench_" + name)[:63]


def secret_from_env(variable: str | None, what: str) -> str | None:
    """The value of a secret's environment variable (None when no variable is named).

    Only the variable's name is ever written to configs, manifests and errors; a named variable that
    is unset is a config error that names the variable, not its value.
    """
    if not variable:
        return None
    value = os.environ.get(variable)
    if not value:
        raise ConfigError(f"environment variable {variable!r} (the {what}) is not set", field=what)
    register(value)  # masked in every file and stream retbench writes
    return value


# The encoder parameters every vector store takes, with their defaults: the dense adapter's names, so one
# YAML anchor can feed FAISS and every store the same embeddings. Stores take them as `**encoder_params`.
ENCODER_PARAMS: dict[str, Any] = {
    "model": None,
    "normalize": True,
    "max_seq_length": None,
    "batch_size": 32,
    "query_prefix": "",
    "doc_prefix": "",
    "device": "cpu",
    "cache_dir": None,
}


class VectorStoreRetriever(Retriever):
    """A vector database fed with `Encoder` vectors; subclasses implement the store primitives.

    A subclass's constructor takes its store settings by name and the encoder settings
    (`ENCODER_PARAMS`) as `**encoder_params`; `extra_params` lets config checking name them.
    """

    capabilities = frozenset({"add", "delete"})
    extra_params = frozenset(ENCODER_PARAMS)

    def __init__(
        self,
        *,
        encoder: Encoder | Mapping[str, JSONValue] | None = None,
        name: str | None = None,
        **encoder_params: Any,
    ) -> None:
        unknown = sorted(set(encoder_params) - set(ENCODER_PARAMS))
        if unknown:
            raise TypeError(f"unexpected parameter {unknown[0]!r} (encoder parameters: {', '.join(ENCODER_PARAMS)})")
        super().__init__(name)
        opts = ENCODER_PARAMS | encoder_params
        if isinstance(encoder, Mapping):  # a config block {kind: http | onnx | static, ...}, as the dense adapter takes
            encoder = create_encoder(encoder)
        self.encoder = encoder or Encoder(opts.pop("model"), **opts)
        self._n = 0  # documents in the store
        self.build_seconds: float | None = None
        self._ready = False

    # -- store primitives ----------------------------------------------------------------------
    @abstractmethod
    def _reset(self, dim: int) -> None:
        """Drop and recreate the collection for vectors of `dim` dimensions."""

    @abstractmethod
    def _write(self, ids: list[str], vectors: np.ndarray, metadata: list[JSONObject]) -> None:
        """Insert or replace these documents' vectors (and metadata, for stores with filters)."""

    @abstractmethod
    def _remove(self, ids: list[str]) -> None:
        """Remove these (present) documents."""

    @abstractmethod
    def _query(self, vectors: np.ndarray, k: int, filters: list[Filter | None]) -> list[Ranking]:
        """Top-k (doc id, similarity: higher is better) for each query vector, within its filter if any."""

    @abstractmethod
    def _present(self, ids: list[str]) -> list[str]:
        """Which of these ids the store holds."""

    def _build(self) -> None:
        """After index() has written every document: build the ANN index (stores that train on the data)."""

    def disk_bytes(self) -> int | None:
        """Bytes the store's data takes on disk (None when it cannot say)."""
        return None

    @abstractmethod
    def store_settings(self) -> JSONObject:
        """The store's own settings for describe() (never secrets)."""

    # -- Retriever -----------------------------------------------------------------------------
    def describe(self) -> JSONObject:
        return {"adapter": self.adapter, "encoder": self.encoder.describe(), **self.store_settings()}

    def fingerprint(self) -> str:
        return self.encoder.fingerprint

    def __len__(self) -> int:
        return self._n

    @staticmethod
    def _metadata(corpus: Corpus) -> list[JSONObject]:
        if corpus.metadata is None:
            return [{} for _ in range(len(corpus))]
        return [dict(m or {}) for m in corpus.metadata]

    @staticmethod
    def _ids(corpus: Corpus, what: str) -> list[str]:
        ids = [str(i) for i in corpus.ids]
        if len(set(ids)) != len(ids):
            raise InputError(f"{what} repeat a document id", field="ids")
        return ids

    def index(self, corpus: Corpus) -> None:
        if len(corpus) == 0:
            raise InputError("cannot index an empty corpus", field="corpus")
        ids = self._ids(corpus, "corpus documents")
        vectors = self.encoder.encode_documents(corpus.joined_texts())
        self._reset(int(vectors.shape[1]))
        self._n = 0
        self._ready = True
        self._write(ids, vectors, self._metadata(corpus))
        self._n = len(ids)
        t0 = time.perf_counter()
        self._build()
        self.build_seconds = time.perf_counter() - t0  # the ANN index build alone (benchmarks report it)

    def _require_index(self) -> None:
        if not self._ready:
            raise InputError(f"{self.adapter} retriever {self.name!r} has no index; call index() first")

    def add(self, corpus: Corpus) -> None:
        """Add documents (an id already stored is replaced); only texts the cache lacks are encoded."""
        self._require_index()
        ids = self._ids(corpus, "added documents")
        if not ids:
            return
        replaced = len(self._present(ids))
        self._write(ids, self.encoder.encode_documents(corpus.joined_texts()), self._metadata(corpus))
        self._n += len(ids) - replaced

    def delete(self, ids: Sequence[str]) -> None:
        """Remove documents by id (unknown ids are ignored)."""
        self._require_index()
        present = self._present([str(d) for d in dict.fromkeys(ids)])
        if present:
            self._remove(present)
            self._n -= len(present)

    def search_vectors(
        self, vectors: np.ndarray, k: int, filters: Sequence[Filter | None] | None = None
    ) -> list[Ranking]:
        """Top-k for query vectors (n x dim): the store alone, without the encoder (cf. dense `search_embeddings`)."""
        self._require_index()
        vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        k = min(int(k), self._n)
        if len(vectors) == 0:
            return []
        if k <= 0:
            return [[] for _ in range(len(vectors))]
        flts = list(filters) if filters is not None else [None] * len(vectors)
        if any(f is not None for f in flts) and "filters" not in self.capabilities:
            raise ConfigError(f"store {self.adapter!r} cannot apply metadata filters", field="metadata.filter")
        return self._query(vectors, k, flts)

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        if not texts:
            return []
        self._require_index()
        return self.search_vectors(self.encoder.encode_queries(list(texts)), k)

    def search_batch_filtered(self, texts: Sequence[str], k: int, filters: Sequence[Filter | None]) -> list[Ranking]:
        if not texts:
            return []
        self._require_index()
        return self.search_vectors(self.encoder.encode_queries(list(texts)), k, filters)
