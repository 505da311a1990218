"""Chunkers that keep exact character offsets, and the chunk <-> document <-> span mapping.

Chunk ids change with every chunker, so id-based qrels cannot compare chunkers; offsets can. Every
chunk therefore carries its document id and `[start, end)` character offsets with
`doc_text[start:end] == chunk.text` always (a property test holds every chunker to it). Chunkers
only choose boundaries; the text is always a slice of the document, never rebuilt from tokens.

Sizes are measured in characters or in tokens of the embedding model's tokenizer. Token counts
come from one tokenization of the whole document (`TokenIndex`): the tokens of a span are those
that share a character with it (a word piece cut by a boundary counts on both sides, as the encoder
sees a piece of it on each side).
Edges of every chunk are trimmed of whitespace; whitespace-only chunks are dropped.

Modules: `spans` (Span, Chunk, ChunkSet), `tokens` (tokenizers, TokenIndex), `splitting`
(boundaries, sentences, recursive split), `base` (Chunker), `windows` and `headings` (the chunkers).
This file is the registry: `make_chunker` builds one from a config block by its `kind`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retbench.chunkers.base import Chunker, Cut
from retbench.chunkers.headings import (
    HEADING_DELIMITER,
    HEADING_STYLES,
    MarkdownHeadings,
    headings,
    normalize_title,
)
from retbench.chunkers.spans import Chunk, ChunkSet, Span
from retbench.chunkers.splitting import SEPARATORS, boundaries, recursive_spans, sentence_spans
from retbench.chunkers.tokens import (
    HFTokenizer,
    RegexTokenizer,
    TokenIndex,
    Tokenizer,
    make_tokenizer,
    resolve_tokenizer_file,
)
from retbench.chunkers.windows import FixedChars, FixedTokens, Recursive, SentenceWindow, WholeDocument
from retbench.errors import ConfigError

CHUNKERS: dict[str, type[Chunker]] = {
    c.kind: c for c in (FixedChars, FixedTokens, SentenceWindow, Recursive, MarkdownHeadings, WholeDocument)
}


def make_chunker(spec: Mapping[str, Any], *, where: str = "") -> Chunker:
    """A chunker from a config block `{kind: ..., name: ..., <params>}`."""
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind not in CHUNKERS:
        raise ConfigError(
            f"unknown chunker kind {kind!r}; expected one of {', '.join(CHUNKERS)}", path=where or None, field="kind"
        )
    try:
        return CHUNKERS[kind](**spec)
    except TypeError as exc:
        raise ConfigError(
            f"chunker {kind!r} rejected its parameters: {exc}", path=where or None, field="params"
        ) from None


__all__ = [
    "CHUNKERS",
    "HEADING_DELIMITER",
    "HEADING_STYLES",
    "SEPARATORS",
    "Chunk",
    "ChunkSet",
    "Chunker",
    "Cut",
    "FixedChars",
    "FixedTokens",
    "HFTokenizer",
    "MarkdownHeadings",
    "Recursive",
    "RegexTokenizer",
    "SentenceWindow",
    "Span",
    "TokenIndex",
    "Tokenizer",
    "WholeDocument",
    "boundaries",
    "headings",
    "make_chunker",
    "make_tokenizer",
    "normalize_title",
    "recursive_spans",
    "resolve_tokenizer_file",
    "sentence_spans",
]
