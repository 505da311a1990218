"""Heading sections as chunks: markdown (ATX) and wikitext headings, each chunk with its heading path."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from retbench.chunkers.base import LEVELS, Chunker, Cut, check_levels, check_size, check_unit, tokenizer_for
from retbench.chunkers.splitting import recursive_spans, trim
from retbench.chunkers.tokens import TokenIndex, Tokenizer
from retbench.errors import ConfigError

_HEADING_DELIMS = re.compile(r"\s*[>›»]\s*")


def normalize_heading_path(path: str | Sequence[str]) -> tuple[str, ...]:
    """Heading path parts (the one rule for anchors, citations and chunk metadata), whitespace collapsed and markup (`#`, `=`) stripped; `A>B`, `A › B` -> (A, B)."""
    parts = _HEADING_DELIMS.split(path) if isinstance(path, str) else list(path)
    out = []
    for p in parts:
        p = " ".join(p.strip().strip("#=").split())
        if p:
            out.append(p)
    return tuple(out)


HEADING_DELIMITER = " > "

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
        separators: Sequence[str] = LEVELS,
        tokenizer: str | Tokenizer | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(tokenizer=tokenizer_for(unit, tokenizer), **kw)
        check_size(max_size, overlap)
        for s in styles:
            if s not in HEADING_STYLES:
                raise ConfigError(
                    f"unknown heading style {s!r}; expected some of {', '.join(HEADING_STYLES)}", field="styles"
                )
        self.max_size, self.overlap = max_size, overlap
        self.styles = list(styles)
        self.unit = check_unit(unit)
        self.separators = list(check_levels(separators))

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
            a, b = trim(text, a, b)
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
