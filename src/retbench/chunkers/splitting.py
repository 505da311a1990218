"""Where text may be cut: separator levels, sentences, and the recursive split-then-merge.

A boundary is the end of a separator match, so the pieces between boundaries are contiguous and
their concatenation is the original text. Sizes are measured on the trimmed span, as its chunk
would be: in characters, or in tokens of a `TokenIndex`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

import numpy as np

from retbench.chunkers.tokens import TokenIndex

Measure = Callable[[int, int], int]


def _measure(text: str, unit: str, tokens: TokenIndex | None) -> Measure:
    """Size of a span as its chunk would be: edges trimmed of whitespace first."""
    if unit == "chars":

        def chars(a: int, b: int) -> int:
            a, b = trim(text, a, b)
            return b - a

        return chars
    assert tokens is not None
    return lambda a, b: int(tokens.count(*trim(text, a, b)))


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


def trim(text: str, a: int, b: int) -> tuple[int, int]:
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
        a, b = trim(text, a, b)
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


def hard_cut(
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
    return hard_cut(start, end, size, overlap, unit, tokens)
