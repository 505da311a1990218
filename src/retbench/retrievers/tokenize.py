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

from retbench.jsontypes import JSONObject

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
        self._stem_cache: dict[str, str | None] = {}
        self._stemmer: Any = None
        if stemmer is not None:
            import Stemmer

            if stemmer not in Stemmer.algorithms():
                raise ValueError(f"unknown Snowball stemmer {stemmer!r}; available: {', '.join(Stemmer.algorithms())}")
            self._stemmer = Stemmer.Stemmer(stemmer)

    def describe(self) -> JSONObject:
        """Settings that change the tokens (go into manifests)."""
        return {
            "stopwords": self.stopwords_setting,
            "stemmer": self.stemmer_name,
            "lower": self.lower,
            "token_pattern": self.token_pattern,
        }

    def _stems(self, texts: Sequence[str]) -> tuple[list[list[str]], set[str], dict[str, str | None]]:
        """Raw split tokens per text, their distinct set, and the memo surface -> stem (None: stopword)."""
        split, lower = self._split, self.lower
        raw = [split(t.lower() if lower else t) for t in texts]
        memo = self._stem_cache
        distinct = set().union(*raw) if raw else set()
        new = distinct.difference(memo)
        if new:
            words = [w for w in new if w not in self.stopwords]
            memo.update(dict.fromkeys(new & self.stopwords))
            if self._stemmer is None:
                memo.update(zip(words, words, strict=True))
            else:
                memo.update(zip(words, self._stemmer.stemWords(words), strict=True))
        return raw, distinct, memo

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """Token lists, one per text; a text with no tokens gives an empty list."""
        raw, _, memo = self._stems(texts)
        return [[s for s in map(memo.__getitem__, toks) if s is not None] for toks in raw]

    def tokenize_ids(self, texts: Sequence[str], vocab: dict[str, int], *, grow: bool) -> list[list[int]]:
        """Token ids under `vocab` (token -> id). With `grow`, unseen tokens get the next ids (for
        documents); without, they are dropped (for queries: a term no document has matches nothing).
        """
        raw, distinct, memo = self._stems(texts)
        if grow:
            unseen: set[str] = {memo[w] for w in distinct} - vocab.keys() - {None}  # type: ignore[assignment, operator]
            vocab.update(zip(sorted(unseen), range(len(vocab), len(vocab) + len(unseen)), strict=True))  # type: ignore[arg-type]
        # one lookup per token: this call's distinct surface forms straight to ids
        ids = {w: vocab[stem] for w in distinct if (stem := memo[w]) is not None and stem in vocab}.get
        return [[i for i in map(ids, toks) if i is not None] for toks in raw]

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        return self.tokenize(texts)
