"""Qdrant, fed with retbench's own embeddings: qdrant-client's local mode, or a Qdrant server.

Where the store lives:
- `location: ":memory:"` (default) or `path: DIR`: qdrant-client's local mode, in this process. It is
  exact brute force in NumPy: `hnsw_config`, `hnsw_ef` and `exact` have no effect there (describe()
  says so), so its numbers are Qdrant's API over an exact search, not Qdrant's HNSW.
- `url`: a Qdrant server (the real engine, HNSW). The API key is read from the environment variable
  named by `api_key_env`, never from the config. A server builds a segment's HNSW graph only past
  `indexing_threshold` and searches segments below `full_scan_threshold` by full scan (both default to
  about 10 MB of vectors: more than a small corpus holds, which would then be searched exactly), so
  `force_hnsw` (default true) sets both to 1 KiB, as a large collection would behave; the adapter then
  waits, bounded by `wait_s`, for the collection to turn green before searching.

`distance` is `cosine` (default), `dot` or `euclid`; scores are Qdrant's own (cosine similarity, inner
product), except euclid, whose distance is negated so that higher is always better. Point ids are
integers assigned here; each point also carries its document id in the payload (`doc_id`) and the
document's metadata (`meta`); query filters (`metadata.filter`) become payload conditions on `meta.<field>`
(match for equality, range for gt/gte/lt/lte).
`index()` replaces a collection of the same name.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from retbench.errors import BackendError
from retbench.jsontypes import JSONObject, JSONValue
from retbench.retrievers.base import Ranking, register
from retbench.retrievers.encoders import Encoder
from retbench.retrievers.filters import Filter
from retbench.retrievers.stores import VectorStoreRetriever, secret_from_env
from retbench.retrievers.stores.chroma import collection_name
from retbench.secrets import has_userinfo

DISTANCES = ("cosine", "dot", "euclid")
HNSW_KEYS = ("m", "ef_construct", "full_scan_threshold", "max_indexing_threads", "on_disk", "payload_m")


def qdrant_filter(flt: Filter | None) -> Any:
    """Qdrant payload conditions on `meta.<field>` for a filter (None for no filter)."""
    if flt is None:
        return None
    from qdrant_client import models

    must: list[Any] = []
    for field, op, value in flt.terms:
        key = f"meta.{field}"
        if op == "eq" and isinstance(value, (str, bool)):
            must.append(models.FieldCondition(key=key, match=models.MatchValue(value=value)))
        elif op == "eq":  # numbers compare as numbers (2005 matches 2005.0)
            must.append(models.FieldCondition(key=key, range=models.Range(gte=value, lte=value)))
        else:
            must.append(models.FieldCondition(key=key, range=models.Range(**{op: value})))
    return models.Filter(must=must)


@register("qdrant")
class QdrantRetriever(VectorStoreRetriever):
    """Qdrant collection searched with query vectors from retbench's Encoder."""

    adapter = "qdrant"
    capabilities = frozenset({"add", "delete", "filters"})

    def __init__(
        self,
        location: str | None = ":memory:",
        path: str | None = None,
        url: str | None = None,
        api_key_env: str | None = None,
        collection: str | None = None,
        distance: str = "cosine",
        hnsw_config: Mapping[str, JSONValue] | None = None,
        hnsw_ef: int | None = None,
        exact: bool = False,
        force_hnsw: bool = True,
        wait_s: float = 600.0,
        timeout: int | None = None,
        upsert_batch: int = 512,
        encoder: Encoder | None = None,
        name: str | None = None,
        **encoder_params: Any,
    ) -> None:
        super().__init__(encoder=encoder, name=name, **encoder_params)
        if path and url:
            raise ValueError("give either path (local mode) or url (a Qdrant server), not both")
        if distance not in DISTANCES:
            raise ValueError(f"unknown distance {distance!r}; expected one of {', '.join(DISTANCES)}")
        unknown = sorted(set(hnsw_config or {}) - set(HNSW_KEYS))
        if unknown:
            raise ValueError(f"unknown hnsw_config setting {unknown[0]!r}; expected one of {', '.join(HNSW_KEYS)}")
        if upsert_batch < 1 or wait_s < 0:
            raise ValueError("upsert_batch must be positive and wait_s not negative")
        if url and has_userinfo(url):
            raise ValueError("url carries credentials (user:pass@host); name an environment variable in api_key_env")
        self.url, self.path = url, path
        self.location = None if (url or path) else (location or ":memory:")
        self.api_key_env = api_key_env
        secret_from_env(api_key_env, "api_key_env")  # fail at config time, not mid-run
        self.collection = collection
        self.distance = distance
        self.hnsw_config = dict(hnsw_config or {})
        self.hnsw_ef, self.exact = hnsw_ef, bool(exact)
        self.force_hnsw, self.wait_s, self.timeout = bool(force_hnsw), float(wait_s), timeout
        self.upsert_batch = int(upsert_batch)
        self._client: Any = None
        self._point: dict[str, int] = {}  # doc id -> point id
        self._doc: dict[int, str] = {}
        self._next = 0

    @property
    def local(self) -> bool:
        """True for qdrant-client's local mode (exact search in this process)."""
        return not self.url

    @property
    def where(self) -> str:
        return self.url or self.path or str(self.location)

    def _name(self) -> str:
        return self.collection or collection_name(self.name)

    def _connect(self) -> Any:
        if self._client is None:
            from qdrant_client import QdrantClient

            try:
                if self.url:
                    api_key = secret_from_env(self.api_key_env, "api_key_env")
                    self._client = QdrantClient(url=self.url, api_key=api_key, timeout=self.timeout)
                elif self.path:
                    self._client = QdrantClient(path=self.path)
                else:
                    self._client = QdrantClient(location=self.location)
            except Exception as exc:
                raise BackendError(f"cannot open Qdrant at {self.where}: {type(exc).__name__}: {exc}") from None
        return self._client

    def store_settings(self) -> JSONObject:
        s: JSONObject = {
            "store": "qdrant",
            "mode": "local (exact brute force; hnsw settings have no effect)" if self.local else "server",
            "location": self.where,
            "collection": self._name(),
            "distance": self.distance,
            "score": "-euclidean distance" if self.distance == "euclid" else f"{self.distance} similarity",
        }
        if not self.local:
            s.update(
                hnsw_config=self.hnsw_config,
                hnsw_ef=self.hnsw_ef,
                exact=self.exact,
                force_hnsw=self.force_hnsw,
                auth=f"api key from ${self.api_key_env}" if self.api_key_env else None,
            )
        return s

    # -- primitives ----------------------------------------------------------------------------
    def _reset(self, dim: int) -> None:
        from qdrant_client import models

        client = self._connect()
        name = self._name()
        dist = {"cosine": models.Distance.COSINE, "dot": models.Distance.DOT, "euclid": models.Distance.EUCLID}[
            self.distance
        ]
        extra: JSONObject = {}
        if not self.local:
            hnsw = {"full_scan_threshold": 1, **self.hnsw_config} if self.force_hnsw else self.hnsw_config
            if hnsw:
                extra["hnsw_config"] = models.HnswConfigDiff(**hnsw)
            if self.force_hnsw:
                extra["optimizers_config"] = models.OptimizersConfigDiff(indexing_threshold=1)
        try:
            if client.collection_exists(name):
                client.delete_collection(name)
            client.create_collection(name, vectors_config=models.VectorParams(size=dim, distance=dist), **extra)
        except Exception as exc:
            raise BackendError(
                f"Qdrant at {self.where}: cannot create collection {name!r}: {type(exc).__name__}: {exc}"
            ) from None
        self._point, self._doc, self._next = {}, {}, 0

    def _write(self, ids: list[str], vectors: np.ndarray, metadata: list[JSONObject]) -> None:
        from qdrant_client import models

        points = []
        for d in ids:
            if d not in self._point:
                self._point[d] = self._next
                self._doc[self._next] = d
                self._next += 1
            points.append(self._point[d])
        client = self._connect()
        for start in range(0, len(ids), self.upsert_batch):
            part = slice(start, start + self.upsert_batch)
            batch = models.Batch(
                ids=points[part],  # type: ignore[arg-type]
                vectors=vectors[part].tolist(),
                payloads=[{"doc_id": d, "meta": m} for d, m in zip(ids[part], metadata[part], strict=True)],
            )
            client.upsert(self._name(), points=batch, wait=True)
        self._wait_green()

    def _wait_green(self) -> None:
        """On a server, wait (bounded by wait_s) until the optimizer has built the index."""
        if self.local:
            return
        from qdrant_client import models

        deadline = time.monotonic() + self.wait_s
        while self._connect().get_collection(self._name()).status != models.CollectionStatus.GREEN:
            if time.monotonic() > deadline:
                raise BackendError(
                    f"Qdrant at {self.where}: collection {self._name()!r} not indexed after {self.wait_s:g} s"
                )
            time.sleep(0.2)

    def _remove(self, ids: list[str]) -> None:
        from qdrant_client import models

        points = [self._point.pop(d) for d in ids]
        for p in points:
            del self._doc[p]
        self._connect().delete(self._name(), points_selector=models.PointIdsList(points=points), wait=True)  # type: ignore[arg-type]

    def _present(self, ids: list[str]) -> list[str]:
        return [d for d in ids if d in self._point]

    def _query(self, vectors: np.ndarray, k: int, filters: list[Filter | None]) -> list[Ranking]:
        from qdrant_client import models

        params = None if self.local else models.SearchParams(hnsw_ef=self.hnsw_ef, exact=self.exact)
        requests = [
            models.QueryRequest(query=v.tolist(), limit=k, params=params, filter=qdrant_filter(f))
            for v, f in zip(vectors, filters, strict=True)
        ]
        responses = self._connect().query_batch_points(self._name(), requests=requests)
        sign = -1.0 if self.distance == "euclid" else 1.0
        return [[(self._doc[int(p.id)], sign * float(p.score)) for p in r.points] for r in responses]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None
        self._ready = False
