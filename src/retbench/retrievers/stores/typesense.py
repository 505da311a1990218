"""Typesense (a server, over its HTTP API), fed with retbench's own embeddings: three systems in one adapter.

One collection holds each document's text (title + text), its vector and its metadata (fields `m_<name>`,
typed from the corpus at `index()`); `mode` picks the search:
- `vector`: nearest neighbours (`vector_query`, Typesense's HNSW over cosine distance; score 1 - distance);
- `keyword`: Typesense's own keyword search over the text (typo tolerance, its text-match score);
  by default `prefix: false` (whole words) and `drop_tokens_threshold` = k (Typesense drops query words
  until k documents match; its default 1 would answer long queries with very few documents);
- `hybrid`: both lists from one `multi_search` request, fused here by reciprocal rank fusion
  (score = sum 1 / (rrf_k + rank), rrf_k 60, the `hybrid` adapter's formula), each list `hybrid_depth`
  deep. Typesense 0.24 (the version on PyPI) answers a vector query only with `q=*`: its own hybrid
  search arrived in 0.25, so this fusion is retbench's, over Typesense's two result lists.
`search_params` are added to every search request as given (e.g. `{num_typos: 1}`).

The API key is read from the environment variable named by `api_key_env`. Filters (`metadata.filter`)
become `filter_by`; a filter on a field the corpus did not have, or with a value of another type,
matches nothing. Typesense answers at most 250 hits a page; deeper searches are paged.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retbench.data import Corpus
from retbench.errors import BackendError
from retbench.jsontypes import JSONObject, JSONValue
from retbench.retrievers.base import Ranking, register
from retbench.retrievers.encoders import Encoder
from retbench.retrievers.filters import Filter, metadata_fields
from retbench.retrievers.stores import VectorStoreRetriever, identifier, secret_from_env
from retbench.secrets import clip, register_url

MODES = ("vector", "keyword", "hybrid")
_TYPES = {int: "int64", float: "float", str: "string", bool: "bool"}
_OPS = {"eq": ":=", "gt": ":>", "gte": ":>=", "lt": ":<", "lte": ":<="}
PAGE = 250


def typesense_filter(flt: Filter | None, fields: dict[str, type]) -> str | None:
    """`filter_by` for a Filter; None when a term can match nothing here (unknown field, other type)."""
    parts = []
    for field, op, value in flt.terms if flt else ():
        kind = fields.get(field)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind in (int, float) and number:
            parts.append(f"m_{field}{_OPS[op]}{value!r}")
        elif kind is str and isinstance(value, str) and op == "eq":
            parts.append(f"m_{field}:=`{value.replace('`', '')}`")
        elif kind is bool and isinstance(value, bool) and op == "eq":
            parts.append(f"m_{field}:={'true' if value else 'false'}")
        else:
            return None
    return " && ".join(parts)


@register("typesense")
class TypesenseRetriever(VectorStoreRetriever):
    """A Typesense collection: vector, keyword or hybrid search."""

    adapter = "typesense"
    capabilities = frozenset({"add", "delete", "filters"})

    def __init__(
        self,
        url: str | None = None,
        api_key_env: str | None = None,
        collection: str | None = None,
        mode: str = "vector",
        search_params: Mapping[str, JSONValue] | None = None,
        hybrid_depth: int = 100,
        rrf_k: float = 60,
        timeout: float = 60.0,
        import_batch: int = 1000,
        encoder: Encoder | None = None,
        name: str | None = None,
        **encoder_params: Any,
    ) -> None:
        super().__init__(encoder=encoder, name=name, **encoder_params)
        if not url:
            raise ValueError("typesense needs a url, e.g. http://127.0.0.1:8108")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        if hybrid_depth < 1 or import_batch < 1:
            raise ValueError("hybrid_depth and import_batch must be positive")
        self.url, self.api_key_env = url.rstrip("/"), api_key_env
        register_url(self.url)  # a `user:pass@` in it is masked wherever an error or a manifest names the url
        secret_from_env(api_key_env, "api_key_env")  # fail at config time, not mid-run
        self.collection = collection or identifier(self.name)
        self.mode, self.search_params = mode, dict(search_params or {})
        self.hybrid_depth, self.rrf_k = int(hybrid_depth), float(rrf_k)
        self.timeout, self.import_batch = float(timeout), int(import_batch)
        self._fields: dict[str, type] = {}
        self._stored: set[str] = set()
        self._pending_texts: list[str] = []  # texts of the documents index()/add() is writing
        self._http: Any = None
        self._lock = threading.Lock()

    # -- HTTP ----------------------------------------------------------------------------------
    def _request(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        import httpx

        with self._lock:
            if self._http is None:
                key = secret_from_env(self.api_key_env, "api_key_env") or ""
                self._http = httpx.Client(base_url=self.url, headers={"X-TYPESENSE-API-KEY": key}, timeout=self.timeout)
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise BackendError(f"Typesense at {self.url}: cannot {what}: {type(exc).__name__}: {exc}") from None
        if resp.status_code >= 400 and not (method == "DELETE" and resp.status_code == 404):
            raise BackendError(
                f"Typesense at {self.url}: cannot {what}: HTTP {resp.status_code} {clip(resp.text, 500)}"
            )
        return resp

    def store_settings(self) -> JSONObject:
        s: JSONObject = {
            "store": "typesense",
            "url": self.url,
            "auth": f"api key from ${self.api_key_env}" if self.api_key_env else None,
            "collection": self.collection,
            "mode": self.mode,
            "search_params": self.search_params,
            "score": {
                "vector": "1 - cosine distance",
                "keyword": "Typesense text match",
                "hybrid": f"RRF (rrf_k {self.rrf_k:g}) of vector and keyword lists",
            }[self.mode],
        }
        if self.mode == "hybrid":
            s["hybrid_depth"] = self.hybrid_depth
        return s

    # -- primitives ----------------------------------------------------------------------------
    def index(self, corpus: Corpus) -> None:
        self._fields = metadata_fields(corpus.metadata)
        self._pending_texts = corpus.joined_texts()
        super().index(corpus)

    def add(self, corpus: Corpus) -> None:
        self._pending_texts = corpus.joined_texts()
        super().add(corpus)

    def _reset(self, dim: int) -> None:
        self._request("DELETE", f"/collections/{self.collection}", "drop the collection")
        fields = [{"name": "text", "type": "string"}, {"name": "vec", "type": "float[]", "num_dim": dim}]
        fields += [{"name": f"m_{f}", "type": _TYPES[t], "optional": True} for f, t in self._fields.items()]
        self._request("POST", "/collections", "create the collection", json={"name": self.collection, "fields": fields})
        self._stored = set()

    def _write(self, ids: list[str], vectors: np.ndarray, metadata: list[JSONObject]) -> None:
        texts = self._pending_texts
        lines = []
        for d, text, v, meta in zip(ids, texts, vectors.tolist(), metadata, strict=True):
            doc = {"id": d, "text": text, "vec": v}
            for f, t in self._fields.items():
                value = meta.get(f)
                if isinstance(value, t) or (t is float and isinstance(value, int) and not isinstance(value, bool)):
                    doc[f"m_{f}"] = value
            lines.append(json.dumps(doc))
        for start in range(0, len(lines), self.import_batch):
            body = "\n".join(lines[start : start + self.import_batch])
            resp = self._request(
                "POST",
                f"/collections/{self.collection}/documents/import",
                "import documents",
                params={"action": "upsert"},
                content=body.encode(),
            )
            failed = [r for r in map(json.loads, resp.text.splitlines()) if not r.get("success")]
            if failed:
                raise BackendError(f"Typesense at {self.url}: {len(failed)} documents not imported: {failed[0]}")
        self._stored.update(ids)

    def _remove(self, ids: list[str]) -> None:
        from urllib.parse import quote

        for d in ids:
            self._request("DELETE", f"/collections/{self.collection}/documents/{quote(d, safe='')}", "delete")
            self._stored.discard(d)

    def _present(self, ids: list[str]) -> list[str]:
        return [d for d in ids if d in self._stored]

    # -- search --------------------------------------------------------------------------------
    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return self.search_batch_filtered(texts, k, [None] * len(texts))

    def search_batch_filtered(self, texts: Sequence[str], k: int, filters: Sequence[Filter | None]) -> list[Ranking]:
        self._require_index()
        k = min(int(k), self._n)
        vectors = self.encoder.encode_queries(list(texts)) if self.mode != "keyword" else [None] * len(texts)
        return [self._one(t, v, k, f) for t, v, f in zip(texts, vectors, filters, strict=True)]

    def _query(self, vectors: np.ndarray, k: int, filters: list[Filter | None]) -> list[Ranking]:
        if self.mode != "vector":
            raise BackendError(f"typesense mode {self.mode!r} needs query texts, not only vectors")
        return [self._one("*", v, k, f) for v, f in zip(vectors, filters, strict=True)]

    def _one(self, text: str, vector: np.ndarray | None, k: int, flt: Filter | None) -> Ranking:
        from retbench.retrievers.fusion import fuse_rrf

        if k <= 0:
            return []
        where = typesense_filter(flt, self._fields)
        if where is None:
            return []
        if self.mode == "hybrid":
            depth = max(k, self.hybrid_depth)
            vec, kw = self._pages([self._vector_search(vector, depth), self._keyword_search(text, depth)], depth, where)
            return fuse_rrf([vec, kw], rrf_k=self.rrf_k, k=k)
        search = self._vector_search(vector, k) if self.mode == "vector" else self._keyword_search(text, k)
        return self._pages([search], k, where)[0]

    def _vector_search(self, vector: Any, k: int) -> dict[str, Any]:
        values = ",".join(map(repr, np.asarray(vector, dtype=np.float32).tolist()))
        return {"q": "*", "vector_query": f"vec:([{values}], k:{k})"}

    def _keyword_search(self, text: str, k: int) -> dict[str, Any]:
        return {"q": text, "query_by": "text", "prefix": False, "drop_tokens_threshold": k}

    def _pages(self, searches: list[dict[str, Any]], k: int, where: str) -> list[Ranking]:
        """Run searches (one multi_search request per page of 250) and read each one's ranking."""
        out: list[Ranking] = [[] for _ in searches]
        for page in range(1, (k - 1) // PAGE + 2):
            body = [
                {
                    "collection": self.collection,
                    **s,
                    "per_page": min(PAGE, k),
                    "page": page,
                    "include_fields": "id",
                    **({"filter_by": where} if where else {}),
                    **self.search_params,
                }
                for s in searches
            ]
            res = self._request("POST", "/multi_search", "search", json={"searches": body}).json()["results"]
            for ranking, r in zip(out, res, strict=True):
                if "error" in r:
                    raise BackendError(f"Typesense at {self.url}: search failed: {r['error']}")
                for hit in r.get("hits", []):
                    score = 1.0 - hit["vector_distance"] if "vector_distance" in hit else float(hit["text_match"])
                    ranking.append((hit["document"]["id"], score))
        return [r[:k] for r in out]

    def close(self) -> None:
        with self._lock:
            if self._http is not None:
                self._http.close()
            self._http = None
        self._ready = False
