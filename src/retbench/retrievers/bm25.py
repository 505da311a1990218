"""BM25 adapters: bm25s (default) and rank-bm25, fed by one shared tokenizer.

Both adapters tokenize with `retrievers.tokenize.Tokenizer`, so a bm25s-vs-rank-bm25 comparison
isolates the scoring function. The corpus is tokenized a batch at a time into term counts held as
flat arrays (`retrievers.postings`), never as one Python list per document, so memory in Python
objects does not grow with the corpus beyond its ids and vocabulary. Neither library updates an
index in place, so `add` and `delete` are full rebuilds from those counts (declared as such in
`describe()`): exact, and measured in benchmarks/bm25_speed.py rather than hidden.

Ids are strings, scores Python floats; documents scoring exactly 0 (no query term matched; both
libraries pad top-k with them) are dropped.
"""

from __future__ import annotations

import hashlib
import json
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from retbench.config.base import validate
from retbench.config.common import BM25Params
from retbench.data import Corpus, Queries, Run
from retbench.data.ids import first_bad_id
from retbench.errors import ConfigError, InputError
from retbench.io.files import replace_atomically
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import Ranking, Retriever, register
from retbench.retrievers.filters import query_filters
from retbench.retrievers.postings import Postings, bm25s_matrix
from retbench.retrievers.tokenize import DEFAULT_PATTERN, Tokenizer

BM25S_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
RANK_BM25_VARIANTS = ("okapi", "bm25l", "bm25plus")
_META = "retbench.json"
TOKENIZE_BATCH = 8192  # documents tokenized at once: bounds the token lists alive at any time


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:16]


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first (argpartition, then a sort of only k items)."""
    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    return idx[np.argsort(-scores[idx], kind="stable")]


class LexicalRetriever(Retriever):
    """What both BM25 adapters share: the tokenizer, id bookkeeping, and rebuild-based add/delete."""

    capabilities = frozenset({"add", "delete"})

    def __init__(
        self,
        *,
        stopwords: str | Sequence[str] | None,
        stemmer: str | None,
        token_pattern: str | None,
        name: str | None,
    ) -> None:
        super().__init__(name)
        self.tokenizer = Tokenizer(stopwords, stemmer, token_pattern=token_pattern or DEFAULT_PATTERN)
        self._ids: list[str] = []
        self._vocab: dict[str, int] = {}  # stem -> token id, contiguous from 0
        self._postings = Postings.empty()  # term counts per document, kept for rebuilds
        self._content = ""  # digest of what is indexed, chained through add/delete
        self.n_rebuilds = 0
        self._id_cache: tuple[str, np.ndarray, bool] | None = None  # (content, ids, plain): see _id_columns

    @staticmethod
    def check_config(params: Mapping[str, object]) -> None:
        """k1, b, delta and epsilon within `config.common.BM25Params`'s ranges (finite numbers), checked when a
        config loads (`retrievers.base.check_system`) and again when one is built."""
        given = {k: params[k] for k in BM25Params.model_fields if k in params}
        validate(BM25Params, given, prefix="params")

    # -- subclasses ----------------------------------------------------------------------------
    @abstractmethod
    def _settings(self) -> JSONObject:
        """Scoring settings for describe()."""

    @abstractmethod
    def _build(self, postings: Postings) -> None:
        """(Re)build the scoring index over term counts aligned with self._ids (terms index self._vocab)."""

    @abstractmethod
    def _search_tokens(self, queries: list[list[int]], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """(doc positions, scores) best first for each non-empty token-id list."""

    # -- Retriever -----------------------------------------------------------------------------
    def describe(self) -> JSONObject:
        return {
            "adapter": self.adapter,
            **self._settings(),
            "tokenizer": self.tokenizer.describe(),
            "add": "full rebuild",
            "delete": "full rebuild",
        }

    def fingerprint(self) -> str:
        return _digest(json.dumps(self.describe(), sort_keys=True), self._content)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def doc_ids(self) -> list[str]:
        """Ids of the indexed documents, in index order (a copy)."""
        return list(self._ids)

    def index(self, corpus: Corpus) -> None:
        if len(corpus) == 0:
            raise InputError("cannot index an empty corpus", field="corpus")
        self._ids = [str(i) for i in corpus.ids]
        self._vocab = {}
        self._postings = self._count(corpus, first_doc=0)
        if not self._vocab:
            self._ids = []
            raise InputError("no document has an indexable token (all empty or stopwords)", field="corpus")
        self._content = corpus.fingerprint()
        self._build(self._postings)

    def _count(self, corpus: Corpus, first_doc: int) -> Postings:
        """Tokenize and count a corpus a batch at a time, growing the vocabulary."""
        parts = []
        for texts in corpus.joined_batches(TOKENIZE_BATCH):
            owner, term = self.tokenizer.token_array(texts, self._vocab, grow=True)
            parts.append(Postings.from_pairs(owner, term, len(texts), first_doc))
            first_doc += len(texts)
        return Postings.concat(parts)

    def _require_index(self) -> None:
        if not self._ids:
            raise InputError(f"{self.adapter} retriever {self.name!r} has no index; call index() first")

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        offsets, positions, scores = self._search_columns(texts, k)
        ids, pos, sc = self._ids, positions.tolist(), scores.tolist()
        return [[(ids[p], s) for p, s in zip(pos[a:b], sc[a:b], strict=True)] for a, b in pairwise(offsets.tolist())]

    def _search_columns(self, texts: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every query's ranking as columns: (offsets per query, doc positions, float64 scores), best first.

        Documents scoring exactly 0 (no query term matched; both libraries pad top-k with them) are dropped.
        """
        self._require_index()
        tokens = self.tokenizer.tokenize_ids(list(texts), self._vocab, grow=False)
        offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
        live = [i for i, t in enumerate(tokens) if t]  # a query with no known term matches nothing
        if not live or k <= 0:
            return offsets, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        results = self._search_tokens([tokens[i] for i in live], min(k, len(self._ids)))
        positions = np.concatenate([p for p, _ in results]).astype(np.int64, copy=False)
        scores = np.concatenate([s for _, s in results]).astype(np.float64)
        owner = np.repeat(np.asarray(live, dtype=np.int64), [len(p) for p, _ in results])
        matched = scores != 0.0
        np.cumsum(np.bincount(owner[matched], minlength=len(tokens)), out=offsets[1:])
        return offsets, positions[matched], scores[matched]

    def search(self, queries: Queries, k: int, *, batch_size: int = 0) -> Run:
        """All queries in one batch, straight from the scores' arrays to the Run's columns.

        The generic path (`Retriever.search`) builds a tuple per ranked document and checks each one;
        here the ids are checked once per index (`_id_columns`) and the scores in one vectorized pass,
        so a ranked document costs no Python work. Anything else (batches, filters, a failure, a bad id
        or score) takes the generic path, which records failures and invalid answers per query.
        """
        qids = list(queries)
        ids, plain = self._id_columns()
        # a subclass's or an instance's own search_batch (a wrapper, a broken backend in a test) takes the generic path
        generic = (
            batch_size or not plain or getattr(self.search_batch, "__func__", None) is not LexicalRetriever.search_batch
        )
        if generic or not qids or any(f is not None for f in query_filters(queries, qids)):
            return super().search(queries, k, batch_size=batch_size)
        start = time.perf_counter()
        try:
            offsets, positions, scores = self._search_columns([queries[q] for q in qids], k)
        except Exception:  # recorded per query by the generic path, as for any other adapter
            return super().search(queries, k)
        latency = (time.perf_counter() - start) / len(qids)
        if not np.isfinite(scores).all():
            return super().search(queries, k)
        return Run(
            qids,
            offsets,
            ids[positions],
            scores,
            latency=dict.fromkeys(qids, latency),
            latency_batch=dict.fromkeys(qids, len(qids)),
            name=self.name,
            _unique=True,
            _owned=True,
        )

    def _id_columns(self) -> tuple[np.ndarray, bool]:
        """The indexed ids as an object array, and whether a Run may take them as they are (text without
        whitespace or control characters, all distinct): checked once per index, not per ranked document."""
        if self._id_cache is None or self._id_cache[0] != self._content or len(self._id_cache[1]) != len(self._ids):
            ids = self._ids
            plain = first_bad_id(ids) is None and len(set(ids)) == len(ids)
            self._id_cache = (self._content, np.asarray(ids, dtype=object), plain)
        return self._id_cache[1], self._id_cache[2]

    def add(self, corpus: Corpus) -> None:
        """Add (or replace, by id) documents; a full rebuild, since neither library updates in place."""
        self._require_index()
        new_ids = [str(i) for i in corpus.ids]
        replaced = set(new_ids) & set(self._ids)
        if replaced:
            self._keep([j for j, d in enumerate(self._ids) if d not in replaced])
        added = self._count(corpus, first_doc=len(self._ids))
        self._ids += new_ids
        self._postings = Postings.concat([self._postings, added])
        self._content = _digest(self._content, "add", corpus.fingerprint())
        self._build(self._postings)
        self.n_rebuilds += 1

    def delete(self, ids: Sequence[str]) -> None:
        """Remove documents by id (unknown ids are ignored); a full rebuild."""
        self._require_index()
        gone = {str(i) for i in ids}
        keep = [j for j, d in enumerate(self._ids) if d not in gone]
        if len(keep) == len(self._ids):
            return
        if not keep:
            raise InputError("deleting these ids would leave the index empty", field="ids")
        self._keep(keep)
        self._content = _digest(self._content, "delete", *sorted(gone))
        self._build(self._postings)
        self.n_rebuilds += 1

    def _keep(self, keep: list[int]) -> None:
        """Keep only the documents at these positions, and only the vocabulary they still use (so
        statistics such as BM25L/BM25+'s per-term constants equal those of a fresh index)."""
        self._ids = [self._ids[j] for j in keep]
        self._postings, used = self._postings.keep(keep, len(self._vocab))
        by_id = list(self._vocab)  # ids are contiguous and in insertion order
        self._vocab = {by_id[old]: new for new, old in enumerate(used.tolist())}

    # -- persistence helpers -------------------------------------------------------------------
    def _write_meta(self, folder: Path) -> None:
        meta = {
            "describe": self.describe(),
            "content": self._content,
            "ids": self._ids,
            "vocab": list(self._vocab),
        }
        self._postings.save(folder)
        replace_atomically(folder / _META, lambda tmp: tmp.write_text(json.dumps(meta), encoding="utf-8"))

    def _read_meta(self, folder: Path) -> None:
        f = folder / _META
        if not f.is_file():
            raise InputError("not a saved retbench BM25 index (no retbench.json)", path=folder)
        meta = json.loads(f.read_text(encoding="utf-8"))
        saved, mine = meta["describe"], self.describe()
        if saved != mine:
            diff = sorted(k for k in set(saved) | set(mine) if saved.get(k) != mine.get(k))
            raise ConfigError(f"saved index was built with different settings ({', '.join(diff)}): {saved}", path=f)
        self._ids, self._content = meta["ids"], meta["content"]
        self._vocab = {t: i for i, t in enumerate(meta["vocab"])}
        postings = Postings.load(folder)
        if postings is None:  # saved before term counts were kept as arrays
            postings = Postings.from_token_lists(meta.get("tokens", []))
        self._postings = postings


@register("bm25s")
class BM25SRetriever(LexicalRetriever):
    """bm25s: eager sparse scoring matrix; `method` picks the BM25 variant (lucene is bm25s's default)."""

    adapter = "bm25s"
    capabilities = frozenset({"add", "delete", "save", "load"})

    def __init__(
        self,
        k1: float = 1.5,
        b: float = 0.75,
        delta: float = 0.5,
        method: str = "lucene",
        idf_method: str | None = None,
        stopwords: str | Sequence[str] | None = "en",
        stemmer: str | None = "english",
        token_pattern: str | None = None,
        backend: str = "numpy",
        n_threads: int = 0,
        name: str | None = None,
    ) -> None:
        for field, value in (("method", method), ("idf_method", idf_method)):
            if value is not None and value not in BM25S_METHODS:
                raise ValueError(f"unknown bm25s {field} {value!r}; expected one of {', '.join(BM25S_METHODS)}")
        if backend not in ("numpy", "numba", "auto"):
            raise ValueError(f"unknown bm25s backend {backend!r}; expected numpy, numba or auto")
        self.check_config({"k1": k1, "b": b, "delta": delta})
        super().__init__(stopwords=stopwords, stemmer=stemmer, token_pattern=token_pattern, name=name)
        self.k1, self.b, self.delta, self.method, self.idf_method = (
            float(k1),
            float(b),
            float(delta),
            method,
            idf_method,
        )
        self.backend, self.n_threads = backend, int(n_threads)
        self._bm25: Any = None

    def _settings(self) -> JSONObject:
        s: JSONObject = {
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "idf_method": self.idf_method or self.method,
        }
        if self.method in ("bm25l", "bm25+"):
            s["delta"] = self.delta
        return s

    def _new_model(self) -> Any:
        import bm25s

        return bm25s.BM25(
            k1=self.k1, b=self.b, delta=self.delta, method=self.method, idf_method=self.idf_method, backend=self.backend
        )

    def _build(self, postings: Postings) -> None:
        """What `bm25s.BM25.index((token_ids, vocab))` builds, computed from the term counts (same bits)."""
        model = self._new_model()
        model.scores = bm25s_matrix(model, postings, len(self._vocab))
        vocab = dict(self._vocab)
        vocab[""] = len(vocab)  # bm25s's empty token, for queries with no known term
        model.vocab_dict = vocab
        model.unique_token_ids_set = set(vocab.values())
        self._bm25 = model

    def _search_tokens(self, queries: list[list[int]], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        docs, scores = self._bm25.retrieve(queries, k=k, show_progress=False, n_threads=self.n_threads)
        return [(docs[i], scores[i]) for i in range(len(queries))]

    def save(self, path: str | Path) -> None:
        """bm25s's own files plus retbench.json (settings, ids, token lists for later rebuilds)."""
        self._require_index()
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        self._bm25.save(str(folder), show_progress=False)
        self._write_meta(folder)

    def load(self, path: str | Path) -> None:
        """Load an index saved with the same settings (a mismatch is a ConfigError naming the fields)."""
        import bm25s

        folder = Path(path)
        self._read_meta(folder)
        self._bm25 = bm25s.BM25.load(str(folder), show_progress=False)
        self._bm25.backend = self.backend


@register("rank_bm25")
class RankBM25Retriever(LexicalRetriever):
    """rank-bm25 (Okapi, BM25L, BM25Plus): scores every document per query in pure Python/NumPy."""

    adapter = "rank_bm25"

    def __init__(
        self,
        variant: str = "okapi",
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        delta: float | None = None,
        stopwords: str | Sequence[str] | None = "en",
        stemmer: str | None = "english",
        token_pattern: str | None = None,
        name: str | None = None,
    ) -> None:
        if variant not in RANK_BM25_VARIANTS:
            raise ValueError(f"unknown rank_bm25 variant {variant!r}; expected one of {', '.join(RANK_BM25_VARIANTS)}")
        self.check_config({"k1": k1, "b": b, "epsilon": epsilon, "delta": delta})
        super().__init__(stopwords=stopwords, stemmer=stemmer, token_pattern=token_pattern, name=name)
        self.variant, self.k1, self.b, self.epsilon = variant, float(k1), float(b), float(epsilon)
        # rank-bm25's own defaults: BM25L delta 0.5, BM25Plus delta 1.0
        self.delta = float(delta) if delta is not None else (1.0 if variant == "bm25plus" else 0.5)
        self._bm25: Any = None

    def _settings(self) -> JSONObject:
        s: JSONObject = {"variant": self.variant, "k1": self.k1, "b": self.b}
        if self.variant == "okapi":
            s["epsilon"] = self.epsilon
        else:
            s["delta"] = self.delta
        return s

    def _build(self, postings: Postings) -> None:
        import rank_bm25  # token ids serve as rank-bm25's tokens (it only counts them)

        tokens = postings.token_lists()
        if self.variant == "okapi":
            self._bm25 = rank_bm25.BM25Okapi(tokens, k1=self.k1, b=self.b, epsilon=self.epsilon)
        elif self.variant == "bm25l":
            self._bm25 = rank_bm25.BM25L(tokens, k1=self.k1, b=self.b, delta=self.delta)
        else:
            self._bm25 = rank_bm25.BM25Plus(tokens, k1=self.k1, b=self.b, delta=self.delta)

    def _search_tokens(self, queries: list[list[int]], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for q in queries:
            scores = np.asarray(self._bm25.get_scores(q), dtype=np.float64)
            idx = top_k(scores, k)
            out.append((idx, scores[idx]))
        return out
