"""Dense retrieval: a sentence-transformers encoder (with the on-disk embedding cache) plus FAISS.

Index types: `flat_ip` (exact inner product: cosine on normalized vectors), `flat_l2` (exact
Euclidean), `hnsw` (M, ef_construction, ef_search), `ivf` (nlist, nprobe) and `ivfpq` (nlist,
nprobe, pq_m, pq_nbits). ANN indexes use inner product unless `metric="l2"`. Scores are the inner
product, or the negated squared L2 distance, so higher is always better.

Every vector carries a FAISS label (an int64 counter) mapped to the document id, so `add` and
`delete` work without renumbering: flat indexes sit in an `IndexIDMap2` and IVF indexes take ids
natively, both removing vectors in place; HNSW cannot remove, so its `delete` rebuilds the graph
from its own stored vectors (declared in `describe()`). `add` encodes only documents the cache has
not seen; IVF centroids trained at `index()` are kept on `add` (not retrained).

Metadata filters (queries' `metadata.filter`, see `retrievers/filters.py`) are applied exactly: the
documents that pass are found in Python and handed to FAISS as an id selector, so with a `flat_*`
index a filtered search is the exact top-k among matching documents: the reference the stores'
filtered search is measured against. (With HNSW/IVF the selector restricts the approximate search.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data import Corpus
from retbench.errors import ConfigError, InputError
from retbench.io.files import replace_atomically
from retbench.jsontypes import JSONObject, JSONValue
from retbench.retrievers.base import Ranking, Retriever, register
from retbench.retrievers.encoders import Encoder, create_encoder
from retbench.retrievers.filters import Filter

INDEX_TYPES = ("flat_ip", "flat_l2", "hnsw", "ivf", "ivfpq")
_META = "retbench.json"
_FAISS_FILE = "index.faiss"
# settings fixed when the index is built; the rest (ef_search, nprobe, batch size, ...) may change on load
_BUILD_KEYS = ("encoder", "index", "metric", "M", "ef_construction", "nlist", "pq_m", "pq_nbits")


def _faiss() -> Any:
    import faiss

    return faiss


def _rows(
    metadata: Sequence[Mapping[str, JSONValue]] | None, start: int, end: int
) -> Sequence[Mapping[str, JSONValue]] | None:
    return metadata[start:end] if metadata is not None else None


@register("dense")
class DenseRetriever(Retriever):
    """Sentence-transformers embeddings searched with FAISS; see the module docstring for the index types.

    The encoder settings (model .. shard_size) build a sentence-transformers `Encoder`; `encoder=` a
    mapping with a `kind` (http, onnx, static; see retrievers/encoders) builds that encoder instead,
    and from code `encoder=` shares an existing one; either way those settings are then ignored.
    `ef_search` and `nprobe` may be changed on the object between searches; the other index settings
    are fixed at `index()`.
    """

    adapter = "dense"
    capabilities = frozenset({"add", "delete", "save", "load", "filters"})
    index_type: str  # always set: one of INDEX_TYPES

    def __init__(
        self,
        model: str | None = None,
        query_prefix: str = "",
        doc_prefix: str = "",
        query_prompt_name: str | None = None,
        doc_prompt_name: str | None = None,
        normalize: bool = True,
        batch_size: int = 32,
        max_seq_length: int | None = None,
        device: str = "cpu",
        index: str = "flat_ip",
        metric: str | None = None,
        M: int = 32,
        ef_construction: int = 200,
        ef_search: int = 64,
        nlist: int | None = None,
        nprobe: int = 8,
        pq_m: int = 16,
        pq_nbits: int = 8,
        cache: bool = True,
        cache_dir: str | None = None,
        shard_size: int = 1024,
        encoder: Encoder | Mapping[str, JSONValue] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        if isinstance(encoder, Mapping):  # a config block: {kind: http | onnx | static | sentence_transformers, ...}
            encoder = create_encoder(encoder)
        if index not in INDEX_TYPES:
            raise ValueError(f"unknown dense index {index!r}; expected one of {', '.join(INDEX_TYPES)}")
        if index.startswith("flat_"):
            implied = index[len("flat_") :]
            if metric not in (None, implied):
                raise ValueError(f"index {index!r} implies metric {implied!r}, not {metric!r}")
            metric = implied
        metric = metric or "ip"
        if metric not in ("ip", "l2"):
            raise ValueError(f"unknown metric {metric!r}; expected 'ip' or 'l2'")
        for field, value in (("M", M), ("ef_construction", ef_construction), ("ef_search", ef_search)):
            if value < 1:
                raise ValueError(f"{field} must be positive")
        if (nlist is not None and nlist < 1) or nprobe < 1 or pq_m < 1 or not 1 <= pq_nbits <= 16:
            raise ValueError("nlist, nprobe and pq_m must be positive and pq_nbits in 1..16")
        self.encoder = encoder or Encoder(
            model,
            query_prefix=query_prefix,
            doc_prefix=doc_prefix,
            query_prompt_name=query_prompt_name,
            doc_prompt_name=doc_prompt_name,
            normalize=normalize,
            batch_size=batch_size,
            max_seq_length=max_seq_length,
            device=device,
            cache=cache,
            cache_dir=cache_dir,
            shard_size=shard_size,
        )
        self.index_type, self.metric = index, metric
        self.M, self.ef_construction, self.ef_search = int(M), int(ef_construction), int(ef_search)
        self.nlist, self.nprobe, self.pq_m, self.pq_nbits = nlist, int(nprobe), int(pq_m), int(pq_nbits)
        self._faiss_index: Any = None
        self._labels: list[str | None] = []  # FAISS label -> doc id (None once deleted)
        self._label_of: dict[str, int] = {}
        self._meta: dict[str, Mapping[str, JSONValue]] = {}  # doc id -> metadata, for filters
        self._built: JSONObject = {}  # effective build settings (nlist, nbits after clamping)
        self._table: np.ndarray | None = None  # label -> id as an array, plus a trailing None for label -1

    # -- description ---------------------------------------------------------------------------
    def _index_settings(self) -> JSONObject:
        s: JSONObject = {"index": self.index_type, "metric": self.metric}
        if self.index_type == "hnsw":
            s.update(M=self.M, ef_construction=self.ef_construction, ef_search=self.ef_search)
        elif self.index_type in ("ivf", "ivfpq"):
            s.update(nlist=self._built.get("nlist", self.nlist), nprobe=self.nprobe)
            if self.index_type == "ivfpq":
                s.update(pq_m=self.pq_m, pq_nbits=self._built.get("pq_nbits", self.pq_nbits))
        return s

    def describe(self) -> JSONObject:
        delete = "rebuild of the HNSW graph" if self.index_type == "hnsw" else "faiss remove_ids, in place"
        add = "faiss add; encodes only uncached documents"
        if self.index_type in ("ivf", "ivfpq"):
            add += "; IVF centroids not retrained"
        return {
            "adapter": self.adapter,
            "encoder": self.encoder.describe(),
            **self._index_settings(),
            "add": add,
            "delete": delete,
        }

    def fingerprint(self) -> str:
        return self.encoder.fingerprint

    def __len__(self) -> int:
        return len(self._label_of)

    @property
    def doc_ids(self) -> list[str]:
        """Ids of the indexed documents, in insertion order."""
        return list(self._label_of)

    # -- building ------------------------------------------------------------------------------
    def _new_index(self, dim: int, train: np.ndarray) -> Any:
        faiss = _faiss()
        metric = faiss.METRIC_INNER_PRODUCT if self.metric == "ip" else faiss.METRIC_L2
        self._built = {}
        if self.index_type.startswith("flat_"):
            flat = faiss.IndexFlatIP(dim) if self.metric == "ip" else faiss.IndexFlatL2(dim)
            return faiss.IndexIDMap2(flat)
        if self.index_type == "hnsw":
            hnsw = faiss.IndexHNSWFlat(dim, self.M, metric)
            hnsw.hnsw.efConstruction = self.ef_construction
            hnsw.hnsw.efSearch = self.ef_search
            return faiss.IndexIDMap2(hnsw)
        n = len(train)
        # default nlist: 4 sqrt(n), but at least 39 training points per centroid (FAISS's own minimum)
        nlist = self.nlist or max(1, min(int(4 * math.sqrt(n)), n // 39))
        nlist = min(nlist, n)
        self._built["nlist"] = nlist
        quantizer = faiss.IndexFlatIP(dim) if self.metric == "ip" else faiss.IndexFlatL2(dim)
        if self.index_type == "ivf":
            ivf = faiss.IndexIVFFlat(quantizer, dim, nlist, metric)
        else:
            if dim % self.pq_m:
                raise ConfigError(f"pq_m={self.pq_m} must divide the embedding dimension {dim}", field="params.pq_m")
            nbits = min(self.pq_nbits, max(1, int(math.log2(n))))  # PQ training needs >= 2**nbits points
            self._built["pq_nbits"] = nbits
            ivf = faiss.IndexIVFPQ(quantizer, dim, nlist, self.pq_m, nbits, metric)
        ivf.train(train)  # the FAISS wrapper keeps `quantizer` alive with the index
        ivf.nprobe = self.nprobe
        return ivf

    def _apply_search_params(self) -> None:
        faiss = _faiss()
        inner = self._faiss_index
        if isinstance(inner, faiss.IndexIDMap2):
            inner = faiss.downcast_index(inner.index)
        if self.index_type == "hnsw":
            inner.hnsw.efSearch = self.ef_search
        elif self.index_type in ("ivf", "ivfpq"):
            faiss.extract_index_ivf(inner).nprobe = self.nprobe

    def _add_vectors(
        self, ids: list[str], vectors: np.ndarray, metadata: Sequence[Mapping[str, JSONValue]] | None = None
    ) -> None:
        if metadata is not None:
            self._meta.update((d, m) for d, m in zip(ids, metadata, strict=True) if m)
        start = len(self._labels)
        labels = np.arange(start, start + len(ids), dtype=np.int64)
        self._faiss_index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), labels)
        self._labels.extend(ids)
        self._table = None
        for i, d in enumerate(ids):
            self._label_of[d] = start + i

    def _vectors(self, corpus: Corpus) -> Iterator[tuple[int, np.ndarray]]:
        """(position of the first document, its batch's vectors): texts stream from the corpus into the encoder."""
        start = 0
        for texts in corpus.joined_batches(self.encoder.stream_batch):
            yield start, self.encoder.encode_documents(texts)
            start += len(texts)

    def _gather(self, corpus: Corpus) -> np.ndarray:
        """Every document's vector in one float32 array, filled a batch at a time (no per-document objects)."""
        out = np.empty((0, 0), dtype=np.float32)
        for start, vecs in self._vectors(corpus):
            if start == 0:
                out = np.empty((len(corpus), vecs.shape[1]), dtype=np.float32)
            out[start : start + len(vecs)] = vecs
        return out

    def index(self, corpus: Corpus) -> None:
        """Encode and index the corpus a batch at a time (`Encoder.stream_batch` texts).

        A flat index takes each batch as it is encoded; HNSW and IVF build from all vectors at once
        (HNSW's graph depends on how vectors are grouped into `add` calls, IVF trains on them all),
        gathered into one array. Either way the index equals the one `index_embeddings` builds from
        all vectors, and no Python object per text or vector outlives its batch.
        """
        if len(corpus) == 0:
            raise InputError("cannot index an empty corpus", field="corpus")
        ids = [str(i) for i in corpus.ids]
        if len(set(ids)) != len(ids):
            raise InputError("corpus has repeated document ids", field="ids")  # before paying for encoding
        if not self.index_type.startswith("flat_"):
            self.index_embeddings(ids, self._gather(corpus), corpus.metadata)
            return
        self._labels, self._label_of, self._meta, self._faiss_index = [], {}, {}, None
        try:
            for start, vecs in self._vectors(corpus):
                if self._faiss_index is None:
                    self._faiss_index = self._new_index(vecs.shape[1], vecs)  # a flat index trains on nothing
                end = start + len(vecs)
                self._add_vectors(ids[start:end], vecs, _rows(corpus.metadata, start, end))
        except BaseException:
            self._faiss_index = None  # no half-built index is searched
            raise

    def index_embeddings(
        self, ids: Sequence[str], vectors: np.ndarray, metadata: Sequence[Mapping[str, JSONValue]] | None = None
    ) -> None:
        """Build the index from precomputed document vectors (rows aligned with `ids`).

        For embeddings made elsewhere (or synthetic ones in benchmarks); they must come from this
        retriever's encoder settings for query search to make sense.
        """
        ids = [str(i) for i in ids]
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(ids) or not ids:
            raise InputError(
                f"need one vector per id: {len(ids)} ids, vectors of shape {vectors.shape}", field="vectors"
            )
        if len(set(ids)) != len(ids):
            raise InputError("corpus has repeated document ids", field="ids")
        self._labels, self._label_of, self._meta = [], {}, {}
        self._faiss_index = self._new_index(vectors.shape[1], vectors)
        self._add_vectors(ids, vectors, metadata)

    def _require_index(self) -> None:
        if self._faiss_index is None:
            raise InputError(f"dense retriever {self.name!r} has no index; call index() or load() first")

    def add(self, corpus: Corpus) -> None:
        """Add documents; an id already indexed is replaced. Only texts the cache lacks are encoded."""
        self._require_index()
        ids = [str(i) for i in corpus.ids]
        if len(set(ids)) != len(ids):
            raise InputError("added documents repeat an id", field="ids")
        present = [d for d in ids if d in self._label_of]
        if present:
            self.delete(present)
        if self.index_type == "hnsw":  # one add call: the graph depends on how vectors are grouped
            self._add_vectors(ids, self._gather(corpus), corpus.metadata)
            return
        for start, vecs in self._vectors(corpus):
            end = start + len(vecs)
            self._add_vectors(ids[start:end], vecs, _rows(corpus.metadata, start, end))

    def delete(self, ids: Sequence[str]) -> None:
        """Remove documents by id (unknown ids are ignored)."""
        self._require_index()
        labels = [self._label_of.pop(str(d)) for d in dict.fromkeys(ids) if str(d) in self._label_of]
        for d in ids:
            self._meta.pop(str(d), None)
        if not labels:
            return
        for lab in labels:
            self._labels[lab] = None
        self._table = None
        if self.index_type == "hnsw":
            self._rebuild_hnsw()
        else:
            self._faiss_index.remove_ids(np.asarray(labels, dtype=np.int64))

    def _rebuild_hnsw(self) -> None:
        """HNSW cannot remove nodes: rebuild the graph from the vectors it stores, keeping labels."""
        faiss = _faiss()
        old = self._faiss_index
        inner = faiss.downcast_index(old.index)
        all_labels = faiss.vector_to_array(old.id_map)
        vectors = inner.reconstruct_n(0, inner.ntotal)
        keep = np.array([self._labels[int(lab)] is not None for lab in all_labels], dtype=bool)
        self._faiss_index = self._new_index(inner.d, vectors[keep])
        if keep.any():
            self._faiss_index.add_with_ids(np.ascontiguousarray(vectors[keep]), all_labels[keep])

    # -- search --------------------------------------------------------------------------------
    def search_embeddings(
        self, queries: np.ndarray, k: int, flt: Filter | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Raw top-k for query vectors: (doc ids, object array n x k; scores, float32 n x k).

        Missing neighbours (fewer than k documents) are padded with id None and score -inf. For
        `flat_*` indexes this is the exact top-k, cheap enough to call per added document.
        """
        self._require_index()
        k = min(int(k), len(self))
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        if k <= 0:
            return np.empty((len(q), 0), dtype=object), np.empty((len(q), 0), dtype=np.float32)
        self._apply_search_params()
        dist, lab = self._faiss_index.search(q, k) if flt is None else self._filtered(q, k, flt)
        scores = dist if self.metric == "ip" else -dist
        if self._table is None or len(self._table) != len(self._labels) + 1:
            self._table = np.asarray([*self._labels, None], dtype=object)
        ids = self._table[np.where(lab < 0, len(self._labels), lab)]
        scores = np.where(lab < 0, -np.inf, scores).astype(np.float32)
        return ids, scores

    def _filtered(self, queries: np.ndarray, k: int, flt: Filter) -> tuple[np.ndarray, np.ndarray]:
        """FAISS search among the documents passing `flt` (an id selector over their labels)."""
        faiss = _faiss()
        labels = [lab for d, lab in self._label_of.items() if flt.matches(self._meta.get(d))]
        if not labels:
            return np.zeros((len(queries), k), dtype=np.float32), np.full((len(queries), k), -1, dtype=np.int64)
        selector = faiss.IDSelectorBatch(np.asarray(labels, dtype=np.int64))
        if self.index_type == "hnsw":
            params = faiss.SearchParametersHNSW(sel=selector, efSearch=self.ef_search)
        elif self.index_type in ("ivf", "ivfpq"):
            params = faiss.SearchParametersIVF(sel=selector, nprobe=self.nprobe)
        else:
            params = faiss.SearchParameters(sel=selector)
        return self._faiss_index.search(queries, k, params=params)

    def search_arrays(self, texts: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """`search_embeddings` for query texts (encoded through the cache)."""
        return self.search_embeddings(self.encoder.encode_queries(texts), k)

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return self._rankings(*self.search_arrays(texts, k))

    def search_batch_filtered(self, texts: Sequence[str], k: int, filters: Sequence[Filter | None]) -> list[Ranking]:
        """Each query searches only the documents its filter passes (exact with a flat index)."""
        vectors = self.encoder.encode_queries(texts)
        out: list[Ranking] = []
        for v, flt in zip(vectors, filters, strict=True):
            out.extend(self._rankings(*self.search_embeddings(v[None], k, flt)))
        return out

    @staticmethod
    def _rankings(ids: np.ndarray, scores: np.ndarray) -> list[Ranking]:
        out: list[Ranking] = []
        for row_ids, row_scores in zip(ids.tolist(), scores.tolist(), strict=True):
            out.append([(d, s) for d, s in zip(row_ids, row_scores, strict=True) if d is not None])
        return out

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """index.faiss plus retbench.json (settings, label table)."""
        self._require_index()
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        faiss = _faiss()
        replace_atomically(folder / _FAISS_FILE, lambda tmp: faiss.write_index(self._faiss_index, str(tmp)))
        meta = {"describe": self.describe(), "built": self._built, "labels": self._labels, "metadata": self._meta}
        replace_atomically(folder / _META, lambda tmp: tmp.write_text(json.dumps(meta), encoding="utf-8"))

    def load(self, path: str | Path) -> None:
        """Load an index saved with the same model and build settings; search settings are this object's."""
        folder = Path(path)
        meta_file = folder / _META
        if not meta_file.is_file() or not (folder / _FAISS_FILE).is_file():
            raise InputError("not a saved retbench dense index (needs index.faiss and retbench.json)", path=folder)
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        self._built = meta.get("built", {})
        saved, mine = meta["describe"], self.describe()
        diff = [k for k in _BUILD_KEYS if saved.get(k) != mine.get(k)]
        if diff:
            raise ConfigError(f"saved index was built with different settings ({', '.join(diff)})", path=meta_file)
        self._faiss_index = _faiss().read_index(str(folder / _FAISS_FILE))
        self._labels = meta["labels"]
        self._table = None
        self._label_of = {d: i for i, d in enumerate(self._labels) if d is not None}
        self._meta = meta.get("metadata", {})
