"""PostgreSQL + pgvector, fed with retbench's own embeddings (psycopg 3).

Connection: `dsn` (e.g. `postgresql://user@host:5432/db`, no password in it) plus `password_env`, the
name of the environment variable holding the password; only the variable's name is ever written. A
password put in the dsn anyway (`user:PASSWORD@`, `password=`) is registered as a secret, and errors
and manifests show the dsn without it (`secrets.register_dsn`).

Table `<table>(doc_id text primary key, embedding vector(dim), meta jsonb)`; `index()` replaces it.
`index` picks the search:
- `exact` (default): no vector index, a sequential scan: exact top-k;
- `hnsw`: `m` (16), `ef_construction` (64), `ef_search` (40), pgvector's defaults;
- `ivfflat`: `lists` (default rows / 1000, at least 1: pgvector's advice up to 1M rows) and `probes` (1).
The index is built after the documents are loaded (IVFFlat trains its lists on them). With an index,
the session sets `enable_seqscan = off` so the planner uses it even on a small table (where it
would otherwise scan, making the "approximate" numbers exact).

`distance`: `cosine` (`<=>`, score 1 - distance = cosine similarity), `ip` (`<#>`, pgvector returns the
negated inner product; score = inner product) or `l2` (`<->`, score = -Euclidean distance, not squared).

Filters (`metadata.filter`) become a WHERE clause on `meta` (jsonb equality; ranges only on JSON
numbers). pgvector 0.8 filters after the index scan, so a selective filter can leave fewer than k
rows; `iterative_scan` (default `relaxed_order`, pgvector's setting of the same name; `off` to
disable) keeps scanning until k rows pass. Rows come back re-sorted by score here.
Each thread gets its own connection, so concurrent clients really run concurrently.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import numpy as np

from retbench.errors import BackendError
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import Ranking, register
from retbench.retrievers.encoders import Encoder
from retbench.retrievers.filters import Filter
from retbench.retrievers.stores import VectorStoreRetriever, identifier, secret_from_env
from retbench.secrets import register_dsn

DISTANCES = {"cosine": ("<=>", "vector_cosine_ops"), "ip": ("<#>", "vector_ip_ops"), "l2": ("<->", "vector_l2_ops")}
INDEXES = ("exact", "hnsw", "ivfflat")
SCANS = ("off", "relaxed_order", "strict_order")
_OPS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def where_clause(flt: Filter | None) -> tuple[str, list[Any]]:
    """SQL condition on the jsonb column `meta` and its parameters."""
    if flt is None:
        return "", []
    parts: list[str] = []
    args: list[Any] = []
    for field, op, value in flt.terms:
        if op == "eq":
            parts.append("meta -> %s = %s::jsonb")
            args += [field, json.dumps(value)]
        else:
            parts.append(
                f"(CASE WHEN jsonb_typeof(meta -> %s) = 'number' THEN (meta ->> %s)::float8 END) {_OPS[op]} %s"
            )
            args += [field, field, float(value)]
    return " WHERE " + " AND ".join(parts), args


@register("pgvector")
class PgvectorRetriever(VectorStoreRetriever):
    """A pgvector table searched with query vectors from retbench's Encoder."""

    adapter = "pgvector"
    capabilities = frozenset({"add", "delete", "filters"})

    def __init__(
        self,
        dsn: str | None = None,
        password_env: str | None = None,
        table: str | None = None,
        distance: str = "cosine",
        index: str = "exact",
        m: int = 16,
        ef_construction: int = 64,
        ef_search: int = 40,
        lists: int | None = None,
        probes: int = 1,
        iterative_scan: str = "relaxed_order",
        encoder: Encoder | None = None,
        name: str | None = None,
        **encoder_params: Any,
    ) -> None:
        super().__init__(encoder=encoder, name=name, **encoder_params)
        if not dsn:
            raise ValueError("pgvector needs a dsn, e.g. postgresql://postgres@127.0.0.1:5432/postgres")
        if distance not in DISTANCES:
            raise ValueError(f"unknown distance {distance!r}; expected one of {', '.join(DISTANCES)}")
        if index not in INDEXES:
            raise ValueError(f"unknown index {index!r}; expected one of {', '.join(INDEXES)}")
        if iterative_scan not in SCANS:
            raise ValueError(f"unknown iterative_scan {iterative_scan!r}; expected one of {', '.join(SCANS)}")
        if index == "ivfflat" and iterative_scan == "strict_order":
            raise ValueError("ivfflat supports iterative_scan off or relaxed_order only")
        if min(m, ef_construction, ef_search, probes, lists or 1) < 1:
            raise ValueError("m, ef_construction, ef_search, lists and probes must be positive")
        self.dsn, self.password_env = dsn, password_env
        self.shown_dsn = register_dsn(dsn)  # what errors and manifests name: the host and database, no password
        secret_from_env(password_env, "password_env")  # fail at config time, not mid-run
        self.table = table or identifier(self.name)
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", self.table):
            raise ValueError(f"table {table!r} must be a lower-case identifier ([a-z_][a-z0-9_]*)")
        self.distance, self.index_type = distance, index
        self.m, self.ef_construction, self.ef_search = int(m), int(ef_construction), int(ef_search)
        self.lists, self.probes, self.iterative_scan = lists, int(probes), iterative_scan
        self._lists_built: int | None = None
        self._local = threading.local()
        self._conns: list[Any] = []
        self._lock = threading.Lock()

    # -- connection ----------------------------------------------------------------------------
    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            import psycopg

            try:
                conn = psycopg.connect(
                    self.dsn, password=secret_from_env(self.password_env, "password_env"), autocommit=True
                )
                self._session(conn)
            except psycopg.Error as exc:
                raise BackendError(f"cannot use PostgreSQL at {self.shown_dsn}: {type(exc).__name__}: {exc}") from None
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _session(self, conn: Any) -> None:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        if self.index_type == "hnsw":
            conn.execute(f"SET hnsw.ef_search = {self.ef_search}")
            conn.execute(f"SET hnsw.iterative_scan = {self.iterative_scan}")
        elif self.index_type == "ivfflat":
            conn.execute(f"SET ivfflat.probes = {self.probes}")
            conn.execute(f"SET ivfflat.iterative_scan = {self.iterative_scan}")
        if self.index_type != "exact":
            conn.execute("SET enable_seqscan = off")

    def _sql(self, query: str, args: Any = None) -> Any:
        import psycopg

        try:
            return self._conn().execute(query, args)
        except psycopg.Error as exc:
            raise BackendError(f"PostgreSQL at {self.shown_dsn}: {type(exc).__name__}: {exc}".strip()) from None

    def store_settings(self) -> JSONObject:
        s: JSONObject = {
            "store": "pgvector",
            "dsn": self.shown_dsn,
            "auth": f"password from ${self.password_env}" if self.password_env else None,
            "table": self.table,
            "distance": self.distance,
            "score": {"cosine": "1 - cosine distance", "ip": "inner product", "l2": "-euclidean distance"}[
                self.distance
            ],
            "index": self.index_type,
        }
        if self.index_type == "hnsw":
            s.update(m=self.m, ef_construction=self.ef_construction, ef_search=self.ef_search)
        elif self.index_type == "ivfflat":
            s.update(lists=self._lists_built or self.lists or "rows / 1000", probes=self.probes)
        if self.index_type != "exact":
            s["iterative_scan"] = self.iterative_scan
        return s

    # -- primitives ----------------------------------------------------------------------------
    def _reset(self, dim: int) -> None:
        self._sql(f"DROP TABLE IF EXISTS {self.table}")
        self._sql(f"CREATE TABLE {self.table} (doc_id text PRIMARY KEY, embedding vector({dim}) NOT NULL, meta jsonb)")

    def _write(self, ids: list[str], vectors: np.ndarray, metadata: list[JSONObject]) -> None:
        import psycopg

        conn = self._conn()
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(f"DELETE FROM {self.table} WHERE doc_id = ANY(%s)", (ids,))
                with cur.copy(f"COPY {self.table} (doc_id, embedding, meta) FROM STDIN") as copy:
                    for d, v, meta in zip(ids, vectors.tolist(), metadata, strict=True):
                        copy.write_row((d, "[" + ",".join(map(repr, v)) + "]", json.dumps(meta)))
        except psycopg.Error as exc:
            raise BackendError(
                f"PostgreSQL at {self.shown_dsn}: cannot write rows: {type(exc).__name__}: {exc}"
            ) from None

    def _build(self) -> None:
        ops = DISTANCES[self.distance][1]
        if self.index_type == "hnsw":
            with_ = f"m = {self.m}, ef_construction = {self.ef_construction}"
            self._sql(f"CREATE INDEX ON {self.table} USING hnsw (embedding {ops}) WITH ({with_})")
        elif self.index_type == "ivfflat":
            self._lists_built = int(self.lists or max(1, self._n // 1000))
            self._sql(
                f"CREATE INDEX ON {self.table} USING ivfflat (embedding {ops}) WITH (lists = {self._lists_built})"
            )
        if self.index_type != "exact":
            self._sql(f"ANALYZE {self.table}")

    def _remove(self, ids: list[str]) -> None:
        self._sql(f"DELETE FROM {self.table} WHERE doc_id = ANY(%s)", (ids,))

    def _present(self, ids: list[str]) -> list[str]:
        found = {r[0] for r in self._sql(f"SELECT doc_id FROM {self.table} WHERE doc_id = ANY(%s)", (ids,))}
        return [d for d in ids if d in found]

    def _query(self, vectors: np.ndarray, k: int, filters: list[Filter | None]) -> list[Ranking]:
        op = DISTANCES[self.distance][0]
        out: list[Ranking] = []
        for v, flt in zip(vectors.tolist(), filters, strict=True):
            where, args = where_clause(flt)
            vec = "[" + ",".join(map(repr, v)) + "]"
            rows = self._sql(
                f"SELECT doc_id, embedding {op} %s::vector AS d FROM {self.table}{where} ORDER BY d LIMIT {int(k)}",
                [vec, *args],
            ).fetchall()
            if self.distance == "cosine":
                ranking = [(d, 1.0 - float(x)) for d, x in rows]
            else:  # <#> is the negated inner product; <-> the distance: negate both so higher is better
                ranking = [(d, -float(x)) for d, x in rows]
            out.append(sorted(ranking, key=lambda r: -r[1]))
        return out

    def disk_bytes(self) -> int | None:
        return int(self._sql("SELECT pg_total_relation_size(%s)", (self.table,)).fetchone()[0])

    def close(self) -> None:
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()
        self._ready = False
