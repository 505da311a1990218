"""LanceDB (embedded), fed with retbench's own embeddings, and its full-text index as a lexical system.

Two adapters over one table layout `(doc_id, vector | text, <metadata columns>)` in `path` (a folder;
default: a temporary folder removed on close). `index()` replaces a table of the same name.

`lancedb` (dense): `index` is
- `flat` (default): no vector index, LanceDB's exact brute-force scan;
- `ivf_pq`: `num_partitions` (LanceDB's default: about sqrt(rows)), `num_sub_vectors` (dim / 16),
  `num_bits` (8); searched with `nprobes` (LanceDB's default 20) and `refine_factor` (re-rank
  nprobes x refine_factor candidates on full vectors; default none);
- `hnsw`: LanceDB's IVF_HNSW_SQ (HNSW graphs inside IVF partitions, scalar-quantized vectors) with `m`
  (20), `ef_construction` (300), `num_partitions`; searched with `ef` (LanceDB's default: 1.5 k) and `nprobes`.
`distance`: `cosine` (score 1 - distance), `dot` (score = inner product), `l2` (score = -squared L2,
as FAISS `flat_l2`). Rows added after `index()` are searched by a flat scan until the index is rebuilt
(LanceDB's behaviour), so `add` is immediately visible.

`lancedb-fts`: LanceDB's own inverted index over the title + text (its defaults: lower case, English
stemming, stop words removed; BM25 scoring), queried as a match of any query term.

Filters (`metadata.filter`) become a SQL `WHERE` evaluated before the search (`prefilter`); metadata
fields become columns typed from the corpus at `index()` (`retrievers/filters.metadata_fields`); a filter
on a field that is not a column, or of the wrong type, matches nothing.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data import Corpus
from retbench.errors import BackendError, InputError
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import Ranking, Retriever, register
from retbench.retrievers.encoders import Encoder
from retbench.retrievers.filters import Filter, metadata_fields
from retbench.retrievers.stores import VectorStoreRetriever, identifier

INDEXES = ("flat", "ivf_pq", "hnsw")
DISTANCES = ("cosine", "dot", "l2")
_OPS = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def lance_where(flt: Filter | None, columns: dict[str, type]) -> str | None:
    """A LanceDB SQL predicate; terms on missing or differently typed columns become `false`."""
    if flt is None:
        return None
    parts = []
    for field, op, value in flt.terms:
        kind = columns.get(field)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = kind is not None and (
            (kind in (int, float) and number) or (kind is str and isinstance(value, str) and op == "eq")
        )
        ok = ok or (kind is bool and isinstance(value, bool) and op == "eq")
        parts.append(f"{field} {_OPS[op]} {_literal(value)}" if ok else "false")
    return " AND ".join(parts)


class LanceTable:
    """One LanceDB table: connection, Arrow rows with typed metadata columns, upsert and delete."""

    def __init__(self, path: str | None, table: str) -> None:
        self.path, self.table = path, table
        self._tmp: str | None = None
        self.tbl: Any = None
        self.columns: dict[str, type] = {}

    @property
    def where(self) -> str:
        return self.path or "a temporary folder"

    def create(self, rows: Any) -> None:
        import lancedb

        if self.path is None and self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="retbench-lancedb-")
        try:
            db = lancedb.connect(self.path or self._tmp)
            self.tbl = db.create_table(self.table, data=rows, mode="overwrite")
        except Exception as exc:
            raise BackendError(
                f"LanceDB at {self.where}: cannot create {self.table!r}: {type(exc).__name__}: {exc}"
            ) from None

    def rows(self, ids: list[str], body: dict[str, Any], metadata: list[JSONObject]) -> Any:
        """An Arrow table: doc_id, the body columns, then one column per known metadata field."""
        import pyarrow as pa

        arrow = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
        cols: dict[str, object] = {"doc_id": pa.array(ids, pa.string()), **body}
        for field, kind in self.columns.items():
            values = [m.get(field) for m in metadata]
            kept = [v if isinstance(v, kind) or (kind is float and isinstance(v, int)) else None for v in values]
            cols[field] = pa.array(
                [float(v) if kind is float and isinstance(v, (int, float)) else v for v in kept], arrow[kind]
            )
        return pa.table(cols)

    def upsert(self, rows: Any) -> None:
        self.tbl.merge_insert("doc_id").when_matched_update_all().when_not_matched_insert_all().execute(rows)

    def present(self, ids: list[str]) -> list[str]:
        found = set(
            self.tbl.search()
            .where(f"doc_id IN ({', '.join(map(_literal, ids))})")
            .select(["doc_id"])
            .limit(len(ids))
            .to_arrow()["doc_id"]
            .to_pylist()
        )
        return [d for d in ids if d in found]

    def remove(self, ids: list[str]) -> None:
        self.tbl.delete(f"doc_id IN ({', '.join(map(_literal, ids))})")

    def disk_bytes(self) -> int:
        folder = Path(self.path or self._tmp or ".") / f"{self.table}.lance"
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())

    def close(self) -> None:
        self.tbl = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


@register("lancedb")
class LanceDBRetriever(VectorStoreRetriever):
    """A LanceDB table searched with query vectors from retbench's Encoder."""

    adapter = "lancedb"
    capabilities = frozenset({"add", "delete", "filters"})

    def __init__(
        self,
        path: str | None = None,
        table: str | None = None,
        distance: str = "cosine",
        index: str = "flat",
        num_partitions: int | None = None,
        num_sub_vectors: int | None = None,
        num_bits: int = 8,
        m: int = 20,
        ef_construction: int = 300,
        nprobes: int | None = None,
        refine_factor: int | None = None,
        ef: int | None = None,
        encoder: Encoder | None = None,
        name: str | None = None,
        **encoder_params: Any,
    ) -> None:
        super().__init__(encoder=encoder, name=name, **encoder_params)
        if distance not in DISTANCES:
            raise ValueError(f"unknown distance {distance!r}; expected one of {', '.join(DISTANCES)}")
        if index not in INDEXES:
            raise ValueError(f"unknown index {index!r}; expected one of {', '.join(INDEXES)}")
        self.distance, self.index_type = distance, index
        self.build = {"num_partitions": num_partitions, "num_sub_vectors": num_sub_vectors, "num_bits": num_bits}
        if index == "hnsw":
            self.build = {"num_partitions": num_partitions, "m": m, "ef_construction": ef_construction}
        self.search_params = {"nprobes": nprobes, "refine_factor": refine_factor, "ef": ef}
        self._t = LanceTable(path, table or identifier(self.name))
        self._fresh = True

    def store_settings(self) -> JSONObject:
        s: JSONObject = {
            "store": "lancedb",
            "path": self._t.where,
            "table": self._t.table,
            "distance": self.distance,
            "score": {"cosine": "1 - cosine distance", "dot": "inner product", "l2": "-squared l2 distance"}[
                self.distance
            ],
            "index": self.index_type,
        }
        if self.index_type != "flat":
            s["build"] = {k: v for k, v in self.build.items() if v is not None}
            s["search"] = {k: v for k, v in self.search_params.items() if v is not None} or "LanceDB defaults"
        return s

    # -- primitives ----------------------------------------------------------------------------
    def _reset(self, dim: int) -> None:
        self._fresh = True  # the next write creates (replaces) the table

    def _write(self, ids: list[str], vectors: np.ndarray, metadata: list[JSONObject]) -> None:
        import pyarrow as pa

        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
        body = {"vector": pa.FixedSizeListArray.from_arrays(flat, int(vectors.shape[1]))}
        if self._fresh:
            self._t.columns = metadata_fields(metadata)
            self._t.create(self._t.rows(ids, body, metadata))
            self._fresh = False
        else:
            self._t.upsert(self._t.rows(ids, body, metadata))

    def _build(self) -> None:
        if self.index_type == "flat":
            return
        from lancedb.index import HnswSq, IvfPq

        kind = IvfPq if self.index_type == "ivf_pq" else HnswSq
        args = {k: v for k, v in self.build.items() if v is not None}
        try:
            self._t.tbl.create_index("vector", config=kind(distance_type=self.distance, **args))
        except Exception as exc:
            raise BackendError(
                f"LanceDB: cannot build the {kind.__name__} index: {type(exc).__name__}: {exc}"
            ) from None

    def _remove(self, ids: list[str]) -> None:
        self._t.remove(ids)

    def _present(self, ids: list[str]) -> list[str]:
        return self._t.present(ids)

    def _query(self, vectors: np.ndarray, k: int, filters: list[Filter | None]) -> list[Ranking]:
        out: list[Ranking] = []
        for v, flt in zip(vectors, filters, strict=True):
            q = self._t.tbl.search(v).distance_type(self.distance).select(["doc_id", "_distance"]).limit(k)
            if self.index_type == "flat":
                q = q.bypass_vector_index()
            for key, value in self.search_params.items():
                if value is not None and self.index_type != "flat":
                    q = getattr(q, key)(value)
            where = lance_where(flt, self._t.columns)
            if where:
                q = q.where(where, prefilter=True)
            res = q.to_arrow()
            dist = res["_distance"].to_pylist()
            # LanceDB's cosine distance is 1 - cosine, its dot "distance" 1 - inner product, l2 the squared distance
            scores = [-x for x in dist] if self.distance == "l2" else [1.0 - x for x in dist]
            out.append(list(zip(res["doc_id"].to_pylist(), scores, strict=True)))
        return out

    def disk_bytes(self) -> int | None:
        return self._t.disk_bytes() if self._t.tbl is not None else None

    def close(self) -> None:
        self._t.close()
        self._ready = False


@register("lancedb-fts")
class LanceDBFullTextRetriever(Retriever):
    """LanceDB's full-text (BM25) index over title + text: a lexical system, no embeddings."""

    adapter = "lancedb-fts"
    capabilities = frozenset({"add", "delete", "filters"})

    def __init__(self, path: str | None = None, table: str | None = None, name: str | None = None) -> None:
        super().__init__(name)
        self._t = LanceTable(path, table or identifier(self.name))
        self._n = 0

    def describe(self) -> JSONObject:
        return {
            "adapter": self.adapter,
            "store": "lancedb",
            "path": self._t.where,
            "table": self._t.table,
            "index": "LanceDB full-text (BM25; defaults: lower case, English stemming, stop words removed)",
        }

    def __len__(self) -> int:
        return self._n

    def _rows(self, corpus: Corpus) -> Any:
        import pyarrow as pa

        meta = VectorStoreRetriever._metadata(corpus)
        return self._t.rows(
            VectorStoreRetriever._ids(corpus, "documents"), {"text": pa.array(corpus.joined_texts())}, meta
        )

    def index(self, corpus: Corpus) -> None:
        if len(corpus) == 0:
            raise InputError("cannot index an empty corpus", field="corpus")
        self._t.columns = metadata_fields(corpus.metadata)
        self._t.create(self._rows(corpus))
        from lancedb.index import FTS

        self._t.tbl.create_index("text", config=FTS(), replace=True)
        self._n = len(corpus)

    def _require(self) -> None:
        if self._t.tbl is None:
            raise InputError(f"lancedb-fts retriever {self.name!r} has no index; call index() first")

    def add(self, corpus: Corpus) -> None:
        """Add or replace documents, then refresh the full-text index (LanceDB indexes new rows on optimize)."""
        self._require()
        if len(corpus) == 0:
            return
        replaced = len(self._t.present(VectorStoreRetriever._ids(corpus, "added documents")))
        self._t.upsert(self._rows(corpus))
        self._t.tbl.optimize()
        self._n += len(corpus) - replaced

    def delete(self, ids: Sequence[str]) -> None:
        self._require()
        present = self._t.present([str(d) for d in dict.fromkeys(ids)])
        if present:
            self._t.remove(present)
            self._n -= len(present)

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return self.search_batch_filtered(texts, k, [None] * len(texts))

    def search_batch_filtered(self, texts: Sequence[str], k: int, filters: Sequence[Filter | None]) -> list[Ranking]:
        from lancedb.query import MatchQuery

        self._require()
        out: list[Ranking] = []
        for text, flt in zip(texts, filters, strict=True):
            q = self._t.tbl.search(MatchQuery(text, "text"), query_type="fts").select(["doc_id", "_score"]).limit(k)
            where = lance_where(flt, self._t.columns)
            if where:
                q = q.where(where, prefilter=True)
            res = q.to_arrow()
            out.append(list(zip(res["doc_id"].to_pylist(), map(float, res["_score"].to_pylist()), strict=True)))
        return out

    def disk_bytes(self) -> int | None:
        return self._t.disk_bytes() if self._t.tbl is not None else None

    def close(self) -> None:
        self._t.close()
