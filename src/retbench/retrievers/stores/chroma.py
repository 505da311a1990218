"""Chroma, fed with retbench's own embeddings: embedded (in memory or persistent) or a Chroma server.

Where the store lives:
- neither `path` nor `host`: an in-process, in-memory client (nothing written);
- `path`: the embedded persistent client (a folder, kept after the run);
- `host`/`port`: the HTTP client of a Chroma server (`chroma run --path DIR --port P`); a token is read
  from the environment variable named by `token_env`, never from the config.

The collection is created with `space` (default `cosine`, right for normalized embeddings; Chroma's own
default is `l2`) and the `hnsw` settings given (`max_neighbors`, `ef_construction`, `ef_search`,
`num_threads`, `batch_size`, `sync_threshold`, `resize_factor`; the legacy metadata names `M`,
`construction_ef` and `search_ef` are accepted too). `index()` replaces a collection of the same name.

Document metadata is stored with each vector (scalar values only: Chroma's rule), and query filters
(`metadata.filter`) become Chroma `where` clauses (`$eq`, `$gt`, `$gte`, `$lt`, `$lte`, joined by `$and`).

Chroma answers distances; they become similarities, higher is better:
`cosine`: 1 - distance (= cosine similarity); `ip`: 1 - distance (= inner product); `l2`: -distance
(the negated squared Euclidean distance, as the dense adapter scores `flat_l2`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from retbench.errors import BackendError
from retbench.jsontypes import JSONObject, JSONValue
from retbench.retrievers.base import Ranking, register
from retbench.retrievers.encoders import Encoder
from retbench.retrievers.filters import Filter
from retbench.retrievers.stores import VectorStoreRetriever, secret_from_env

SPACES = ("cosine", "ip", "l2")
HNSW_KEYS = (
    "max_neighbors",
    "ef_construction",
    "ef_search",
    "num_threads",
    "batch_size",
    "sync_threshold",
    "resize_factor",
)
_LEGACY = {"M": "max_neighbors", "construction_ef": "ef_construction", "search_ef": "ef_search"}


def chroma_where(flt: Filter | None) -> dict[str, Any] | None:
    """A Chroma `where` clause for a filter (None for no filter)."""
    if flt is None:
        return None
    terms: list[dict[str, Any]] = [{field: {f"${op}": value}} for field, op, value in flt.terms]
    return terms[0] if len(terms) == 1 else {"$and": terms}


def collection_name(text: str) -> str:
    """A valid Chroma collection name (3-512 of [a-zA-Z0-9._-], alphanumeric at both ends) from any text."""
    name = re.sub(r"[^a-zA-Z0-9._-]+", "-", text).strip("._-")
    name = f"retbench-{name}" if name else "retbench"
    return name[:512].rstrip("._-")


@register("chroma")
class ChromaRetriever(VectorStoreRetriever):
    """Chroma collection searched with query vectors from retbench's Encoder."""

    adapter = "chroma"
    capabilities = frozenset({"add", "delete", "filters"})

    def __init__(
        self,
        path: str | None = None,
        host: str | None = None,
        port: int = 8000,
        ssl: bool = False,
        token_env: str | None = None,
        token_header: str = "Authorization",
        collection: str | None = None,
        space: str = "cosine",
        hnsw: Mapping[str, JSONValue] | None = None,
        encoder: Encoder | None = None,
        name: str | None = None,
        **encoder_params: Any,
    ) -> None:
        super().__init__(encoder=encoder, name=name, **encoder_params)
        if path and host:
            raise ValueError("give either path (embedded persistent client) or host (Chroma server), not both")
        if space not in SPACES:
            raise ValueError(f"unknown space {space!r}; expected one of {', '.join(SPACES)}")
        settings: JSONObject = {}
        for key, value in (hnsw or {}).items():
            key = _LEGACY.get(key.removeprefix("hnsw:"), key.removeprefix("hnsw:"))
            if key == "space":
                raise ValueError("give the distance as the 'space' parameter, not inside 'hnsw'")
            if key not in HNSW_KEYS:
                raise ValueError(f"unknown hnsw setting {key!r}; expected one of {', '.join(HNSW_KEYS)}")
            settings[key] = value
        self.path, self.host, self.port, self.ssl = path, host, int(port), bool(ssl)
        self.token_env, self.token_header = token_env, token_header
        secret_from_env(token_env, "token_env")  # fail at config time, not mid-run
        self.collection = collection
        self.space, self.hnsw = space, settings
        self._client: Any = None
        self._col: Any = None

    # -- client --------------------------------------------------------------------------------
    @property
    def location(self) -> str:
        if self.host:
            return f"{'https' if self.ssl else 'http'}://{self.host}:{self.port}"
        return self.path or "memory"

    def _connect(self) -> Any:
        if self._client is None:
            import chromadb
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            try:
                if self.host:
                    headers = {}
                    token = secret_from_env(self.token_env, "token_env")
                    if token:
                        headers[self.token_header] = (
                            f"Bearer {token}" if self.token_header.lower() == "authorization" else token
                        )
                    self._client = chromadb.HttpClient(
                        host=self.host, port=self.port, ssl=self.ssl, headers=headers, settings=settings
                    )
                elif self.path:
                    self._client = chromadb.PersistentClient(path=self.path, settings=settings)
                else:
                    self._client = chromadb.EphemeralClient(settings=settings)
            except Exception as exc:  # unreachable server, unreadable folder: name the store
                raise BackendError(f"cannot open Chroma at {self.location}: {type(exc).__name__}: {exc}") from None
        return self._client

    def store_settings(self) -> JSONObject:
        client = "http" if self.host else "persistent" if self.path else "ephemeral"
        return {
            "store": "chroma",
            "client": client,
            "location": self.location,
            "collection": self.collection or collection_name(self.name),
            "space": self.space,
            "hnsw": self.hnsw,
            "score": {"cosine": "1 - cosine distance", "ip": "1 - ip distance", "l2": "-squared l2 distance"}[
                self.space
            ],
            "auth": f"token from ${self.token_env}" if self.token_env else None,
        }

    # -- primitives ----------------------------------------------------------------------------
    def _reset(self, dim: int) -> None:
        client = self._connect()
        name = self.collection or collection_name(self.name)
        try:
            if name in {getattr(c, "name", c) for c in client.list_collections()}:
                client.delete_collection(name)
            self._col = client.create_collection(
                name, configuration={"hnsw": {"space": self.space, **self.hnsw}}, embedding_function=None
            )
        except Exception as exc:
            raise BackendError(
                f"Chroma at {self.location}: cannot create collection {name!r}: {type(exc).__name__}: {exc}"
            ) from None

    def _write(self, ids: list[str], vectors: np.ndarray, metadata: list[JSONObject]) -> None:
        size = max(1, min(int(self._connect().get_max_batch_size()), 4096))  # the server caps a request's size
        for start in range(0, len(ids), size):
            part = slice(start, start + size)
            metas = [
                {k: v for k, v in m.items() if isinstance(v, (str, int, float, bool))} or None for m in metadata[part]
            ]
            self._col.upsert(
                ids=ids[part], embeddings=np.ascontiguousarray(vectors[part], dtype=np.float32), metadatas=metas
            )

    def _remove(self, ids: list[str]) -> None:
        self._col.delete(ids=ids)

    def _present(self, ids: list[str]) -> list[str]:
        found = set(self._col.get(ids=ids, include=[])["ids"])
        return [d for d in ids if d in found]

    def _query(self, vectors: np.ndarray, k: int, filters: list[Filter | None]) -> list[Ranking]:
        if any(f is not None for f in filters):
            return [self._search(v[None], k, chroma_where(f))[0] for v, f in zip(vectors, filters, strict=True)]
        return self._search(vectors, k, None)

    def _search(self, vectors: np.ndarray, k: int, where: dict[str, Any] | None) -> list[Ranking]:
        res = self._col.query(
            query_embeddings=np.ascontiguousarray(vectors, dtype=np.float32),
            n_results=k,
            include=["distances"],
            where=where,
        )
        out: list[Ranking] = []
        for ids, dists in zip(res["ids"], res["distances"], strict=True):
            if self.space == "l2":
                out.append([(d, -float(x)) for d, x in zip(ids, dists, strict=True)])
            else:
                out.append([(d, 1.0 - float(x)) for d, x in zip(ids, dists, strict=True)])
        return out

    def close(self) -> None:
        """Drop the client; an in-memory collection is deleted (ephemeral clients share one process-wide store)."""
        if self._client is not None and not (self.host or self.path) and self._col is not None:
            with contextlib.suppress(Exception):  # already gone: nothing to release
                self._client.delete_collection(self._col.name)
        self._client = self._col = None
        self._ready = False
