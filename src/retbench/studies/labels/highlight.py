"""Which words of a document to mark for the person grading it: the query's terms, stopwords aside.

Terms match as BM25 matches them (`retrievers.tokenize.Tokenizer`: lowercase, words of two or more word
characters, English stopwords dropped, Snowball stems compared), so "cells" in a query marks "cell" and
"Cellular" is marked only if it stems the same. The document comes back as segments of its own text,
in order, each marked or not: joined they are the text exactly, so the page builds text nodes from them and
never parses the document as HTML.
"""

from __future__ import annotations

import re

from retbench.retrievers.tokenize import DEFAULT_PATTERN, Tokenizer

_WORD = re.compile(DEFAULT_PATTERN)


class Highlighter:
    """Query terms and the marked segments of a document (one tokenizer, its stem memo kept)."""

    def __init__(self) -> None:
        self.tokenizer = Tokenizer()

    def _stems(self, words: list[str]) -> list[str | None]:
        """Each word's stem, or None for a stopword (one tokenizer call for all of them)."""
        return [tokens[0] if len(tokens) == 1 else None for tokens in self.tokenizer.tokenize(words)]

    def terms(self, query: str) -> list[str]:
        """The query's words that count, lowercased, in order of first use (stopwords and single letters out)."""
        words = [m.group().lower() for m in _WORD.finditer(query)]
        return list(dict.fromkeys(w for w, s in zip(words, self._stems(words), strict=True) if s is not None))

    def segments(self, text: str, terms: list[str]) -> list[dict[str, object]]:
        """`text` cut into [{"text", "mark"}] runs, marked where a word stems like one of `terms`."""
        wanted = {s for s in self._stems(terms) if s is not None}
        matches = list(_WORD.finditer(text))
        stems = self._stems([m.group() for m in matches])
        out: list[dict[str, object]] = []
        at = 0
        for match, stem in zip(matches, stems, strict=True):
            if stem is not None and stem in wanted:
                if match.start() > at:
                    out.append({"text": text[at : match.start()], "mark": False})
                out.append({"text": match.group(), "mark": True})
                at = match.end()
        if at < len(text) or not out:
            out.append({"text": text[at:], "mark": False})
        return out
