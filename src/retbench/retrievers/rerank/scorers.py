"""Rerankers: score (query, document) pairs so a first stage's candidates can be re-ordered.

Kinds (the `kind` of a `rerank:` block):

- `cross_encoder`: a sentence-transformers `CrossEncoder` (local folder or hub name) reads query
  and document together; `batch_size` and `max_length` as in `CrossEncoder.predict`;
- `bi_encoder`: cosine of the query and document vectors of a dense model, through the shared
  `Encoder` and its embedding cache (a cheap second opinion, or a larger model than the first stage);
- `http`: a `/rerank` endpoint in the shape Cohere, Jina and text-embeddings-inference share:
  POST {"query", "documents", "top_n"} -> {"results": [{"index", "relevance_score"}]} (TEI's bare
  list of {"index", "score"} is read too); the key comes from an environment variable, never the config;
- `module:factory`: a user's function returning a `Reranker`; its parameters are checked against
  its signature like an adapter's.

A reranker returns one float per document, higher is better. `score_many` lets a local model score
the candidates of many queries in one call (a batch is not cut at query boundaries).
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import check_params, import_object
from retbench.secrets import clip, from_env, register_url, request_url

KINDS = ("cross_encoder", "bi_encoder", "http")


class Reranker(ABC):
    """Scores a query against its candidate documents."""

    kind: str = ""

    @abstractmethod
    def fingerprint(self) -> str:
        """What the scores depend on (model files and scoring settings): the pair cache's namespace."""

    def describe(self) -> JSONObject:
        """The configuration that reproduces this reranker (goes into manifests; never secrets)."""
        return {"kind": self.kind}

    @abstractmethod
    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in the documents' order."""

    def score_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        """Scores for several queries' documents; local models override this to batch across queries."""
        return [self.score(q, docs) for q, docs in items]

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients or models."""


def _model_fingerprint(model: str) -> str:
    from retbench.retrievers.encoders import fingerprint_folder

    path = Path(model).expanduser()
    return fingerprint_folder(path) if path.is_dir() else f"name:{model}"


class CrossEncoderReranker(Reranker):
    """A sentence-transformers `CrossEncoder`; scores are its raw outputs (logits for a one-label model)."""

    kind = "cross_encoder"

    def __init__(self, model: str, batch_size: int = 32, max_length: int | None = None, device: str = "cpu") -> None:
        if batch_size < 1 or (max_length is not None and max_length < 1):
            raise ValueError("batch_size and max_length must be positive")
        self.model_name, self.batch_size, self.max_length, self.device = str(model), batch_size, max_length, device
        self._model: Any = None
        self._fp: str | None = None

    @property
    def model(self) -> Any:
        if self._model is None:
            from sentence_transformers import CrossEncoder

            try:
                self._model = CrossEncoder(self.model_name, max_length=self.max_length, device=self.device)
            except Exception as exc:
                raise ConfigError(
                    f"cannot load cross-encoder {self.model_name!r}: {exc}", field="rerank.model"
                ) from None
        return self._model

    def fingerprint(self) -> str:
        if self._fp is None:
            self._fp = f"ce:{_model_fingerprint(self.model_name)}:len={self.max_length}"
        return self._fp

    def describe(self) -> JSONObject:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "model_fingerprint": self.fingerprint(),
            "batch_size": self.batch_size,
            "max_length": self.max_length,
        }

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Raw `CrossEncoder.predict` over pairs, as float64 (the one place the model is called)."""
        if not pairs:
            return np.zeros(0)
        out = self.model.predict(list(pairs), batch_size=self.batch_size, show_progress_bar=False)
        return np.asarray(out, dtype=np.float64).reshape(len(pairs), -1)[:, -1]

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        return self.score_many([(query, documents)])[0]

    def score_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        pairs = [(q, d) for q, docs in items for d in docs]
        flat = self.predict(pairs).tolist()
        out, at = [], 0
        for _, docs in items:
            out.append(flat[at : at + len(docs)])
            at += len(docs)
        return out


class BiEncoderReranker(Reranker):
    """Cosine of normalized query and document vectors from a dense model (the shared Encoder and cache)."""

    kind = "bi_encoder"

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        query_prefix: str = "",
        doc_prefix: str = "",
        cache_dir: str | None = None,
    ) -> None:
        from retbench.retrievers.encoders import Encoder

        self.encoder = Encoder(
            model,
            query_prefix=query_prefix,
            doc_prefix=doc_prefix,
            batch_size=batch_size,
            max_seq_length=max_length,
            cache_dir=cache_dir,
        )

    def fingerprint(self) -> str:
        enc = self.encoder
        blob = json.dumps([enc.settings("query"), enc.settings("document")], sort_keys=True)
        return "bi:" + hashlib.sha1(blob.encode()).hexdigest()[:16]

    def describe(self) -> JSONObject:
        return {"kind": self.kind, "encoder": self.encoder.describe()}

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        return self.score_many([(query, documents)])[0]

    def score_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        qv = self.encoder.encode_queries([q for q, _ in items])
        docs = [d for _, ds in items for d in ds]
        dv = self.encoder.encode_documents(docs) if docs else np.zeros((0, qv.shape[1]), dtype=np.float32)
        out, at = [], 0
        for i, (_, ds) in enumerate(items):
            out.append((dv[at : at + len(ds)] @ qv[i]).astype(np.float64).tolist())
            at += len(ds)
        return out


class HttpReranker(Reranker):
    """A `/rerank` endpoint (Cohere / Jina / text-embeddings-inference shape); see the module docstring.

    `api_key_env` names the environment variable holding a bearer token; the token itself is never
    stored in the config, the manifest or an error message. Scores are cached by `fingerprint` (url +
    model unless given), so give a new `fingerprint` when the server's model changes behind the same URL.
    """

    kind = "http"

    def __init__(
        self,
        url: str,
        model: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 30.0,
        max_documents: int = 1000,
        fingerprint: str | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {url!r}")
        if api_key_env and not from_env(api_key_env):
            raise ValueError(f"environment variable {api_key_env} (api_key_env) is not set")
        # the URL's userinfo and secret query values are registered; only the public form is shown
        self.url, self.public_url = url, register_url(url)
        self.model, self.api_key_env = model, api_key_env
        self.timeout, self.max_documents, self._fp = float(timeout), int(max_documents), fingerprint

    def fingerprint(self) -> str:
        return self._fp or f"http:{self.public_url}:{self.model or ''}"

    def describe(self) -> JSONObject:
        return {"kind": self.kind, "url": self.public_url, "model": self.model, "api_key_env": self.api_key_env}

    def _post(self, body: dict[str, Any]) -> Any:
        url, headers = request_url(self.url)
        headers["Content-Type"] = "application/json"
        if self.api_key_env:
            headers["Authorization"] = f"Bearer {from_env(self.api_key_env) or ''}"
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            # the body may echo the key (a proxy's debug page, a server that repeats the request): masked
            # before it is cut, so neither the error, a log, nor `serve --rerank http`'s reply shows it
            detail = clip(exc.read(1 << 16).decode("utf-8", "replace"), 300)
            raise RuntimeError(f"rerank server answered HTTP {exc.code}: {detail}") from None

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        scores: list[float] = []
        for start in range(0, len(documents), self.max_documents):
            part = list(documents[start : start + self.max_documents])
            body: JSONObject = {"query": query, "documents": part, "top_n": len(part)}
            if self.model:
                body["model"] = self.model
            scores.extend(parse_rerank_response(self._post(body), len(part)))
        return scores


def parse_rerank_response(payload: Any, n: int) -> list[float]:
    """Scores by document position from a `/rerank` answer; a malformed answer raises with what was wrong."""
    results = payload.get("results") if isinstance(payload, dict) else payload
    if not isinstance(results, list):
        raise ValueError("rerank answer has no 'results' list")
    scores: list[float | None] = [None] * n
    for item in results:
        if not isinstance(item, dict) or "index" not in item:
            raise ValueError(f"rerank result without an index: {clip(str(item), 100)}")
        idx = item["index"]
        value = item.get("relevance_score", item.get("score"))
        if not isinstance(idx, int) or not 0 <= idx < n:
            raise ValueError(f"rerank result index {idx!r} is not one of the {n} documents sent")
        if not isinstance(value, (int, float)):
            raise ValueError(f"rerank result {idx} has no numeric relevance_score")
        if scores[idx] is not None:
            raise ValueError(f"rerank result index {idx} appears twice")
        scores[idx] = float(value)
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise ValueError(f"rerank answer left out {len(missing)} of {n} documents (asked for top_n={n})")
    return [float(s) for s in scores]  # type: ignore[arg-type]


BUILTIN: dict[str, type[Reranker]] = {
    "cross_encoder": CrossEncoderReranker,
    "bi_encoder": BiEncoderReranker,
    "http": HttpReranker,
}


def create_reranker(kind: str, params: Mapping[str, Any] | None = None, *, where: str = "") -> Reranker:
    """Build a reranker by kind or `module:factory`, checking parameters against its signature."""
    params = dict(params or {})
    if kind in BUILTIN:
        factory: Any = BUILTIN[kind]
    elif ":" in kind:
        factory = import_object(kind, field="rerank.kind")
    else:
        raise ConfigError(
            f"unknown rerank kind {kind!r}; expected one of {', '.join(KINDS)} or module:factory",
            path=where or None,
            field="rerank.kind",
        )
    check_params(factory, params, what=f"rerank kind {kind!r}", where=where, prefix="rerank.")
    try:
        reranker = factory(**params)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"rerank kind {kind!r} rejected its parameters: {exc}", path=where or None, field="rerank"
        ) from None
    if not isinstance(reranker, Reranker):
        raise ConfigError(f"factory {kind!r} returned {type(reranker).__name__}, not a Reranker", field="rerank.kind")
    return reranker
