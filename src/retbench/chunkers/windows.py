"""Chunkers by size: fixed character or token windows, sentence windows, and the recursive splitter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retbench.chunkers.base import LEVELS, Chunker, Cut, check_levels, check_size, check_unit, tokenizer_for
from retbench.chunkers.splitting import hard_cut, recursive_spans, sentence_spans
from retbench.chunkers.tokens import DEFAULT_TOKENIZER, TokenIndex, Tokenizer


class WholeDocument(Chunker):
    """Each document as one chunk: the baseline a chunker is compared against on a document-judged corpus."""

    kind = "document"

    def cuts(self, text: str, tokens: TokenIndex) -> list[Cut]:
        return [(0, len(text), "")]


class FixedChars(Chunker):
    """Windows of `size` characters stepping by `size - overlap`."""

    kind = "fixed_chars"

    def __init__(self, size: int = 800, overlap: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        check_size(size, overlap)
        self.size, self.overlap = size, overlap

    def cuts(self, text: str, tokens: TokenIndex) -> list[Cut]:
        return [(a, b, "") for a, b in hard_cut(0, len(text), self.size, self.overlap, "chars", None)]


class FixedTokens(Chunker):
    """Windows of `size` tokens of the embedding model's tokenizer stepping by `size - overlap`."""

    kind = "fixed_tokens"
    unit = "tokens"

    def __init__(
        self, size: int = 200, overlap: int = 0, tokenizer: str | Tokenizer | None = DEFAULT_TOKENIZER, **kw: Any
    ) -> None:
        super().__init__(tokenizer=tokenizer, **kw)
        check_size(size, overlap)
        self.size, self.overlap = size, overlap

    def cuts(self, text: str, tokens: TokenIndex) -> list[Cut]:
        off = tokens.offsets
        n = len(off)
        step = self.size - self.overlap
        out: list[Cut] = []
        for t in range(0, n, step):
            last = min(t + self.size, n) - 1
            out.append((int(off[t, 0]), int(off[last, 1]), ""))
            if last == n - 1:
                break
        return out


class SentenceWindow(Chunker):
    """Windows of `size` sentences stepping by `size - overlap` sentences."""

    kind = "sentences"

    def __init__(self, size: int = 5, overlap: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        check_size(size, overlap)
        self.size, self.overlap = size, overlap

    def cuts(self, text: str, tokens: TokenIndex) -> list[Cut]:
        sents = sentence_spans(text)
        out: list[Cut] = []
        for i in range(0, len(sents), self.size - self.overlap):
            last = min(i + self.size, len(sents)) - 1
            out.append((sents[i][0], sents[last][1], ""))
            if last == len(sents) - 1:
                break
        return out


class Recursive(Chunker):
    """Split at paragraphs, then lines, sentences, words (LangChain's recursive splitter), then merge."""

    kind = "recursive"

    def __init__(
        self,
        size: int = 800,
        overlap: int = 0,
        separators: Sequence[str] = LEVELS,
        unit: str = "chars",
        tokenizer: str | Tokenizer | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(tokenizer=tokenizer_for(unit, tokenizer), **kw)
        check_size(size, overlap)
        self.size, self.overlap = size, overlap
        self.separators = list(check_levels(separators))
        self.unit = check_unit(unit)

    def cuts(self, text: str, tokens: TokenIndex) -> list[Cut]:
        spans = recursive_spans(
            text,
            0,
            len(text),
            size=self.size,
            overlap=self.overlap,
            levels=self.separators,
            unit=self.unit,
            tokens=tokens,
        )
        return [(a, b, "") for a, b in spans]
