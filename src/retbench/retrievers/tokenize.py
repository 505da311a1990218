"""The one lexical tokenizer both BM25 adapters share.

bm25s and rank-bm25 are fed the very same token lists, so comparing them isolates the scoring
function. The recipe is bm25s's own (the one behind its published BEIR numbers): lowercase, split on
the scikit-learn pattern `\\b\\w\\w+\\b`, drop stopwords *before* stemming, then Snowball-stem with
PyStemmer. Stemming runs once per distinct surface token and is memoized, which is what makes it cheap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

DEFAULT_PATTERN = r"(?u)\b\w\w+\b"


def _stopword_list(stopwords: str | Iterable[str] | None) -> frozenset[str]:
    """Resolve a stopword setting: a bm25s language code ("en", "english", "de", ...), a list, or None."""
    if stopwords is None or stopwords is False:
        return frozenset()
    if isinstance(stopwords, str):
        from bm25s.tokenization import _infer_stopwords

        try:
            return frozenset(_infer_stopwords(stopwords))
        except ValueError:
            raise ValueError(
                f"unknown stopword list {stopwords!r}; use a language code like 'en', a list, or None"
            ) from None
    return frozenset(str(w).lower() for w in stopwords)


class Tokenizer:
    """Lowercase + regex split + stopword removal + Snowball stemming, memoized per distinct token."""

    def __init__(
        self,
        stopwords: str | Sequence[str] | None = "en",
        stemmer: str | None = "english",
        *,
        lower: bool = True,
        token_pattern: str = DEFAULT_PATTERN,
    ) -> None:
        self.stopwords_setting = stopwords if stopwords is None or isinstance(stopwords, str) else sorted(stopwords)
        self.stopwords = _stopword_list(stopwords)
        self.stemmer_name = stemmer
        self.lower = lower
        self.token_pattern = token_pattern
        self._split = re.compile(token_pattern).findall
        self._stem_cache: dict[str, str] = {}
        self._stemmer: Any = None
        if stemmer is not None:
            import Stemmer

            if stemmer not in Stemmer.algorithms():
                raise ValueError(f"unknown Snowball stemmer {stemmer!r}; available: {', '.join(Stemmer.algorithms())}")
            self._stemmer = Stemmer.Stemmer(stemmer)

    def describe(self) -> dict[str, Any]:
        """Settings that change the tokens (go into manifests)."""
        return {
            "stopwords": self.stopwords_setting,
            "stemmer": self.stemmer_name,
            "lower": self.lower,
            "token_pattern": self.token_pattern,
        }

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """Token lists, one per text; a text with no tokens gives an empty list."""
        split, stop, lower = self._split, self.stopwords, self.lower
        raw: list[list[str]] = []
        for text in texts:
            toks = split(text.lower() if lower else text)
            raw.append([t for t in toks if t not in stop] if stop else toks)
        if self._stemmer is None:
            return raw
        cache = self._stem_cache
        new = {t for toks in raw for t in toks if t not in cache}
        if new:
            words = list(new)
            cache.update(zip(words, self._stemmer.stemWords(words), strict=True))
        return [[cache[t] for t in toks] for toks in raw]

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        return self.tokenize(texts)
