"""The Chunker base class: subclasses choose boundaries, the base class trims them and builds chunks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from retbench.chunkers.spans import Chunk, ChunkSet
from retbench.chunkers.splitting import SEPARATORS, trim
from retbench.chunkers.tokens import DEFAULT_TOKENIZER, TokenIndex, Tokenizer, make_tokenizer
from retbench.data import Corpus
from retbench.errors import ConfigError

Cut = tuple[int, int, str]  # start, end, heading path


class Chunker(ABC):
    """Splits a document's text into exact `[start, end)` spans; subclasses choose the boundaries."""

    kind: str = ""
    #: "chars" or "tokens": what `size` and `overlap` count
    unit: str = "chars"

    def __init__(self, name: str = "", tokenizer: str | Tokenizer | None = None) -> None:
        self.name = name or self.kind
        self.tokenizer = make_tokenizer(tokenizer)

    @abstractmethod
    def cuts(self, text: str, tokens: TokenIndex) -> list[Cut]:
        """Raw spans with heading paths (trimmed and validated by `chunk`)."""

    def describe(self) -> dict[str, Any]:
        """The configuration that reproduces this chunker (goes into manifests)."""
        params = {k: v for k, v in vars(self).items() if not k.startswith("_") and k not in ("name", "tokenizer")}
        return {"kind": self.kind, "name": self.name, "tokenizer": self.tokenizer.name, **params}

    def chunk(self, doc_id: str, text: str) -> list[Chunk]:
        """The chunks of one document, in document order."""
        tokens = TokenIndex(self.tokenizer.offsets(text))
        out: list[Chunk] = []
        for a, b, path in self.cuts(text, tokens):
            a, b = trim(text, a, b)
            if a >= b:
                continue
            out.append(Chunk(f"{doc_id}#{len(out)}", doc_id, a, b, text[a:b], path, int(tokens.count(a, b))))
        return out

    def chunk_corpus(self, corpus: Corpus) -> ChunkSet:
        """Chunk every document of a corpus (its `texts`, titles are not part of the offsets)."""
        chunks: list[Chunk] = []
        for i in range(len(corpus)):
            chunks.extend(self.chunk(corpus.ids[i], corpus.texts[i]))
        return ChunkSet(chunks, list(corpus.ids), chunker=self.describe())


def check_size(size: int, overlap: int) -> None:
    if size < 1:
        raise ConfigError(f"chunk size must be >= 1, got {size}", field="size")
    if not 0 <= overlap < size:
        raise ConfigError(f"overlap must be >= 0 and < size ({size}), got {overlap}", field="overlap")


LEVELS = ("paragraph", "line", "sentence", "word")


def check_levels(levels: Sequence[str]) -> tuple[str, ...]:
    for lv in levels:
        if lv not in SEPARATORS:
            raise ConfigError(
                f"unknown separator level {lv!r}; expected some of {', '.join(SEPARATORS)}", field="separators"
            )
    return tuple(levels)


def check_unit(unit: str) -> str:
    if unit not in ("chars", "tokens"):
        raise ConfigError(f"unit must be 'chars' or 'tokens', got {unit!r}", field="unit")
    return unit


def tokenizer_for(unit: str, tokenizer: str | Tokenizer | None) -> str | Tokenizer | None:
    """The tokenizer a chunker measures with: the one given, else the default model's when sizes count tokens."""
    return tokenizer if tokenizer is not None else (DEFAULT_TOKENIZER if unit == "tokens" else None)
