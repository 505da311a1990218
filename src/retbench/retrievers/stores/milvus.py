"""Milvus through pymilvus, fed with retbench's own embeddings.

`uri` names the server: a Milvus server, or Milvus Lite's gRPC server (`milvus-lite server --host
127.0.0.1 --port N`, what the tests and benchmark run). Milvus Lite is an embedded engine implementing a
subset of Milvus' API in one process: its numbers are Milvus Lite's, not a Milvus cluster's. A token,
if the server needs one, is read from the environment variable named by `token_env`.

Collection `(pk varchar primary key, vec float_vector(dim), meta json)`; `index()` replaces it.
`index_type` (default `FLAT`, exact) and `index_params` (e.g. HNSW `{M: 16, efConstruction: 200}`, IVF
`{nlist: 128}`) go to Milvus as given, and so do `search_params` (e.g. `{ef: 64}`, `{nprobe: 16}`):
retbench checks neither, Milvus does. `distance`: `cosine` (score = cosine similarity), `ip` (inner
product) or `l2` (Milvus' squared distance, negated). Collections are created with Strong consistency,
so a document is searchable as soon as `add` returns.

Filters (`metadata.filter`) become a Milvus boolean expression on the JSON field (`meta["year"] >= 2010`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from retbench.errors import BackendError
from retbench.jsontypes import JSONObject, JSONValue
from retbench.retrievers.base import Ranking, register
from retbench.retrievers.encoders import Encoder
from retbench.retrievers.filters import Filter
from retbench.retrievers.stores import VectorStoreRetriever, identifier, secret_from_env
from retbench.secrets import register_url

DISTANCES = {"cosine": "COSINE", "ip": "IP", "l2": "L2"}
_OPS = {"eq": "==", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def milvus_expr(flt: Filter | None) -> str:
    """A Milvus filter expression over the JSON field `meta` ('' for no filter)."""
    if flt is None:
        return ""
    parts = []
    for field, op, value in flt.terms:
        literal = ("true" if value else "false") if isinstance(value, bool) else json.dumps(value)
        parts.append(f'meta["{field}"] {_OPS[op]} {literal}')
    return " and ".join(parts)


@register("milvus")
class MilvusRetriever(VectorStoreRetriever):
    """A Milvus (or Milvus Lite) collection searched with query vectors from retbench's Encoder."""

    adapter = "milvus"
    capabilities = frozenset({"add", "delete", "filters"})

    def __init__(
        self,
        uri: str | None = None,
        token_env: str | None = None,
        collection: str | None = None,
        distance: str = "cosine",
        index_type: str = "FLAT",
        index_params: Mapping[str, JSONValue] | None = None,
        search_params: Mapping[str, JSONValue] | None = None,
        insert_batch: int = 1000,
        timeout: float = 60.0,
        encoder: Encoder | None = None,
        name: str | None = None,
        **encoder_params: Any,
    ) -> None:
        super().__init__(encoder=encoder, name=name, **encoder_params)
        if not uri:
            raise ValueError("milvus needs a uri, e.g. http://127.0.0.1:19530 (a `milvus-lite server` or Milvus)")
        if distance not in DISTANCES:
            raise ValueError(f"unknown distance {distance!r}; expected one of {', '.join(DISTANCES)}")
        if insert_batch < 1:
            raise ValueError("insert_batch must be positive")
        self.uri, self.token_env = uri, token_env
        register_url(uri)  # a `user:pass@` in it is masked wherever an error or a manifest names the uri
        secret_from_env(token_env, "token_env")  # fail at config time, not mid-run
        self.collection = collection or identifier(self.name)
        self.distance, self.index_type = distance, str(index_type)
        self.index_params, self.search_params = dict(index_params or {}), dict(search_params or {})
        self.insert_batch, self.timeout = int(insert_batch), float(timeout)
        self._client: Any = None

    def _connect(self) -> Any:
        if self._client is None:
            from pymilvus import MilvusClient

            try:
                token = secret_from_env(self.token_env, "token_env") or ""
                self._client = MilvusClient(uri=self.uri, token=token, timeout=self.timeout)
            except Exception as exc:
                raise BackendError(f"cannot open Milvus at {self.uri}: {type(exc).__name__}: {exc}") from None
        return self._client

    def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._connect(), method)(*args, **kwargs)
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(f"Milvus at {self.uri}: cannot {what}: {type(exc).__name__}: {exc}") from None

    def store_settings(self) -> JSONObject:
        return {
            "store": "milvus",
            "uri": self.uri,
            "auth": f"token from ${self.token_env}" if self.token_env else None,
            "collection": self.collection,
            "distance": self.distance,
            "score": {"cosine": "cosine similarity", "ip": "inner product", "l2": "-squared l2 distance"}[
                self.distance
            ],
            "index_type": self.index_type,
            "index_params": self.index_params,
            "search_params": self.search_params,
        }

    # -- primitives ----------------------------------------------------------------------------
    def _reset(self, dim: int) -> None:
        from pymilvus import DataType, MilvusClient

        client = self._connect()
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=1024)
        schema.add_field("vec", DataType.FLOAT_VECTOR, dim=dim)
        schema.add_field("meta", DataType.JSON)
        index = client.prepare_index_params()
        index.add_index(
            "vec", index_type=self.index_type, metric_type=DISTANCES[self.distance], params=self.index_params
        )
        if self._call("list collections", "has_collection", self.collection):
            self._call("drop the collection", "drop_collection", self.collection)
        self._call(
            f"create collection {self.collection!r}",
            "create_collection",
            self.collection,
            schema=schema,
            index_params=index,
            consistency_level="Strong",
        )
        self._call("load the collection", "load_collection", self.collection)

    def _write(self, ids: list[str], vectors: np.ndarray, metadata: list[JSONObject]) -> None:
        rows = [{"pk": d, "vec": v, "meta": m} for d, v, m in zip(ids, vectors.tolist(), metadata, strict=True)]
        for start in range(0, len(rows), self.insert_batch):
            self._call("write documents", "upsert", self.collection, rows[start : start + self.insert_batch])

    def _remove(self, ids: list[str]) -> None:
        self._call("delete documents", "delete", self.collection, ids=ids)

    def _present(self, ids: list[str]) -> list[str]:
        found = {r["pk"] for r in self._call("look up ids", "get", self.collection, ids=ids, output_fields=["pk"])}
        return [d for d in ids if d in found]

    def _search(self, vectors: np.ndarray, k: int, expr: str) -> list[Ranking]:
        params = {"metric_type": DISTANCES[self.distance], "params": self.search_params}
        res = self._call(
            "search",
            "search",
            self.collection,
            data=vectors.tolist(),
            limit=k,
            anns_field="vec",
            search_params=params,
            filter=expr,
            output_fields=["pk"],
        )
        sign = -1.0 if self.distance == "l2" else 1.0
        return [[(str(h["pk"]), sign * float(h["distance"])) for h in hits] for hits in res]

    def _query(self, vectors: np.ndarray, k: int, filters: list[Filter | None]) -> list[Ranking]:
        if all(f is None for f in filters):
            return self._search(vectors, k, "")
        return [self._search(v[None], k, milvus_expr(f))[0] for v, f in zip(vectors, filters, strict=True)]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None
        self._ready = False
