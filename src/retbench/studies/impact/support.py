"""Context recall without an LLM: the share of a query's reference sentences supported by the retrieved text.

    CR(q) = |{s in sentences(reference(q)) : max_{t in sentences(top-context_k docs)} cos(s, t) >= threshold}|
            / |sentences(reference(q))|

The sentence-support judge is a seam (`SentenceSupport`): `CosineSupport` is the encoder-based one,
`JudgeSupport` asks an LLM judge (`context_recall.judge:` in the config) whether each sentence is supported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from retbench.errors import ConfigError
from retbench.studies.impact.novelty import normalize_rows, split_sentences

if TYPE_CHECKING:  # the model and the judge load only when a study uses them
    from retbench.llm.judge import Judge
    from retbench.llm.settings import JudgeSettings
    from retbench.retrievers.encoders.encoder import Encoder


# -- context recall without an LLM ------------------------------------------------------------------
class SentenceSupport(Protocol):
    """Decides which reference sentences one context document supports (an LLM judge can implement this)."""

    def support(self, references: Sequence[str], text: str) -> np.ndarray:
        """Boolean per reference sentence: does `text` support it?"""
        ...

    def describe(self) -> dict[str, object]:
        """What the manifest records about this judge (kind, model, threshold), so a report names it."""
        ...


class CosineSupport:
    """A reference sentence is supported by a document when some sentence of it has cosine >= threshold."""

    def __init__(self, encoder: Encoder, threshold: float = 0.8) -> None:
        if not -1.0 <= threshold <= 1.0:
            raise ConfigError(f"threshold must be a cosine in [-1, 1], got {threshold!r}", field="threshold")
        self.encoder = encoder
        self.threshold = float(threshold)
        self._vecs: dict[str, np.ndarray] = {}

    def describe(self) -> dict[str, object]:
        return {"judge": "cosine", "threshold": self.threshold, "split": "sentences (chunking.sentence_spans)"}

    def prepare(self, texts: Sequence[str]) -> None:
        """Encode the sentences of many texts in one call (the Encoder caches them on disk)."""
        todo = list(dict.fromkeys(s for t in texts for s in split_sentences(t) if s not in self._vecs))
        if todo:
            vecs = normalize_rows(self.encoder.encode_documents(todo))
            self._vecs.update(zip(todo, vecs, strict=True))

    def _matrix(self, sentences: Sequence[str]) -> np.ndarray:
        self.prepare(sentences)
        return np.stack([self._vecs[s] for s in sentences])

    def support(self, references: Sequence[str], text: str) -> np.ndarray:
        sents = split_sentences(text)
        if not references or not sents:
            return np.zeros(len(references), dtype=bool)
        sims = self._matrix(references) @ self._matrix(sents).T
        return sims.max(axis=1) >= self.threshold


class ContextRecall:
    """Context recall against reference answers, decomposed per context document.

    CR(q, context) = share of q's reference sentences supported by at least one context document, where
    `support` says which sentences one document supports (cosine by default). Support is cached per
    (query, document), so a changed context costs only its new documents.
    """

    def __init__(
        self,
        references: Mapping[str, str | Sequence[str]],
        texts: Callable[[str], str],
        support: SentenceSupport,
        context_k: int = 5,
    ) -> None:
        if context_k < 1:
            raise ConfigError("context_k must be >= 1", field="context_k")
        self.references: dict[str, list[str]] = {}
        for q, ref in references.items():
            sents = split_sentences(ref) if isinstance(ref, str) else [s for r in ref for s in split_sentences(r)]
            if sents:
                self.references[str(q)] = sents
        self.texts = texts
        self.judge = support
        self.context_k = int(context_k)
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def has(self, qid: str) -> bool:
        return qid in self.references

    def prepare(self, doc_ids: Sequence[str]) -> None:
        """Batch-encode what many documents (and all references) need, when the judge can."""
        prep = getattr(self.judge, "prepare", None)
        if callable(prep):
            prep([*(s for r in self.references.values() for s in r), *(self.texts(d) for d in dict.fromkeys(doc_ids))])

    def supported(self, qid: str, doc_id: str) -> np.ndarray:
        key = (qid, doc_id)
        hit = self._cache.get(key)
        if hit is None:
            hit = np.asarray(self.judge.support(self.references[qid], self.texts(doc_id)), dtype=bool)
            self._cache[key] = hit
        return hit

    def score(self, qid: str, doc_ids: Sequence[str]) -> float:
        """CR of one query for a context (its first `context_k` documents); NaN without references."""
        refs = self.references.get(qid)
        if refs is None:
            return float("nan")
        covered = np.zeros(len(refs), dtype=bool)
        for d in list(doc_ids)[: self.context_k]:
            covered |= self.supported(qid, d)
        return float(covered.mean())

    def scores(self, qids: Sequence[str], contexts: Sequence[Sequence[str]]) -> np.ndarray:
        self.prepare(
            [d for q, ctx in zip(qids, contexts, strict=True) if self.has(q) for d in list(ctx)[: self.context_k]]
        )
        return np.array([self.score(q, ctx) for q, ctx in zip(qids, contexts, strict=True)], dtype=np.float64)

    def close(self) -> None:
        """Stops a judge's local server, if the support judge started one."""
        close = getattr(self.judge, "close", None)
        if callable(close):
            close()


class JudgeSupport:
    """A reference sentence is supported by a document when an LLM judge says so.

    One call per (query, document) with the versioned `support_v1` prompt: the document is the context,
    the query's reference sentences the numbered statements, and the judge answers one 1/0 verdict per
    statement (RAGAS context recall, Es et al., 2023). Calls go through the judge machinery (pinned
    identity, cache, call log). A failed or unparseable verdict supports no sentence and is counted by
    status in `describe()`, which the report prints as "judged N of M".
    """

    def __init__(self, settings: JudgeSettings, max_chars: int = 2000, log_path: Path | None = None) -> None:
        from retbench.studies.judging import JudgeServer

        self.settings, self.max_chars, self.log_path = settings, int(max_chars), log_path
        self.server = JudgeServer(settings)
        self._judge: Judge | None = None
        self.statuses: dict[str, int] = {}

    def judge(self) -> Judge:
        if self._judge is None:
            from retbench.llm.judge import Judge
            from retbench.studies.judging import PARSERS

            self._judge = Judge(
                self.settings,
                "support_v1",
                base_url=self.server.url(),
                log_path=self.log_path,
                parse=PARSERS["support"],
            )
        return self._judge

    def support(self, references: Sequence[str], text: str) -> np.ndarray:
        if not references or not text.strip():
            return np.zeros(len(references), dtype=bool)
        listed = "\n".join(f"{i}. {s}" for i, s in enumerate(references, 1))
        [v] = self.judge().judge([(0, {"context": text[: self.max_chars], "statements": listed})])
        fits = v.ok and len(v.value) == len(references)
        status = "unparseable" if v.ok and not fits else v.status
        self.statuses[status] = self.statuses.get(status, 0) + 1
        return np.asarray(v.value if fits else [False] * len(references), dtype=bool)

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {"judge": "llm", "prompt": "support_v1", "statuses": dict(self.statuses)}
        if self._judge is not None:
            out.update(model=self._judge.identity.model, model_sha256=self._judge.identity.model_sha256)
            out["stats"] = self._judge.stats.to_dict(self.settings)
        return out

    def close(self) -> None:
        self.server.close()
