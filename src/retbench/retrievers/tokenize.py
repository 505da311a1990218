"""The one lexical tokenizer both BM25 adapters share.

bm25s and rank-bm25 are fed the very same token lists, so comparing them isolates the scoring
function. The recipe is bm25s's own (the one behind its published BEIR numbers): lowercase, split on
the scikit-learn pattern `\\b\\w\\w+\\b`, drop stopwords *before* stemming, then Snowball-stem with
PyStemmer. Stemming runs once per distinct surface token and is memoized, which is what makes it cheap.

How the default pattern is split fast, with the same tokens. For `findall`, `\\b\\w\\w+\\b` finds exactly
the maximal runs of two or more word characters (`\\w` is `str.isalnum()` or "_"). Among ASCII characters
the word characters are `[A-Za-z0-9_]`. So the texts of a call are joined with a break word between
them, encoded as UTF-8, every other ASCII byte is turned into a space (`bytes.translate`) and the whole
is split once (`bytes.split`, in C: no regex scan; about a quarter of the regex's time on SciFact).
Every piece is bounded by ASCII non-word characters or a text's ends, so an ASCII piece is one maximal
run: a token if it has two or more characters (single characters are dropped), and a piece holding
other bytes gets the regex itself, on its decoded text, which finds exactly the runs the regex finds
there in the whole text (a run never crosses the piece's ends). The break words' positions tell which text each token belongs to.
Texts holding the break word (possible only with `lower=False`: lowercased text never holds an
uppercase letter) and any other token pattern go through the regex text by text.

Tokens become ids in one pass: a dict from each distinct piece of the call to its token's id (-1: a
stopword, a single character, or, for queries, a term no document has), looked up per piece by `map` in
C; the few pieces holding several tokens are expanded after. The stems come from the memo, and a
batch's new stems get the next ids in sorted order.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, pairwise, repeat
from typing import Any, NamedTuple, cast

import numpy as np

from retbench.jsontypes import JSONObject

DEFAULT_PATTERN = r"(?u)\b\w\w+\b"
_ASCII_WORD = (string.ascii_letters + string.digits + "_").encode()  # what `\w` matches among ASCII bytes
_TO_SPACES = bytes(b if b in _ASCII_WORD or b > 127 else 32 for b in range(256))  # UTF-8's other bytes kept
_LONE = "surrogatepass"  # a lone surrogate (not a word character) survives the round trip through UTF-8
_BREAK_WORD = "QQ"  # between texts on the fast path; a text holding it takes the regex path
# what the fast split yields besides tokens: single characters (dropped, -1) and the break word (-2)
_NOT_TOKENS: dict[object, int] = {**{bytes([b]): -1 for b in _ASCII_WORD}, _BREAK_WORD.encode(): -2}


class _Pieces(NamedTuple):
    """What a call's texts split into (see the module docstring)."""

    pieces: Sequence[object]  # every piece, in text order: bytes on the fast path, tokens on the regex path
    owner: np.ndarray | None  # the text of each piece; None on the fast path, where the break words tell it
    keys: Sequence[object]  # the distinct pieces that are exactly one token ...
    words: list[str]  # ... and that token, at the same position
    others: dict[bytes, list[str]]  # the other distinct pieces (fast path, not ASCII) and their tokens


def _expand(
    owner: np.ndarray, ids: np.ndarray, at: np.ndarray, several: list[list[int]]
) -> tuple[np.ndarray, np.ndarray]:
    """Put the token ids of each piece coded -3 - k (`several[k]`) in its place, in text order."""
    spots = np.flatnonzero(ids <= -3)
    k = -3 - ids[spots]
    sizes = np.fromiter(map(len, several), dtype=np.int64, count=len(several))
    flat = np.fromiter(chain.from_iterable(several), dtype=np.int64, count=int(sizes.sum()))
    n = sizes[k]
    # ragged gather: the j-th id of a spot's piece is flat[start of that piece + j]
    gather = np.repeat((np.cumsum(sizes) - sizes)[k] - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
    where = np.concatenate([at, np.repeat(spots, n)])
    order = np.argsort(where, kind="stable")  # a piece's tokens share its position and keep their order
    return np.concatenate([owner[at], np.repeat(owner[spots], n)])[order], np.concatenate([ids[at], flat[gather]])[
        order
    ]


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
        stopwords: str | Iterable[str] | None = "en",
        stemmer: str | None = "english",
        *,
        lower: bool = True,
        token_pattern: str = DEFAULT_PATTERN,
    ) -> None:
        if stopwords is not None and not isinstance(stopwords, str):
            stopwords = list(stopwords)  # read once: a generator would be empty by the second read
        self.stopwords_setting = stopwords if stopwords is None or isinstance(stopwords, str) else sorted(stopwords)
        self.stopwords = _stopword_list(stopwords)
        self.stemmer_name = stemmer
        self.lower = lower
        self.token_pattern = token_pattern
        self._split = re.compile(token_pattern).findall
        self._fast = token_pattern == DEFAULT_PATTERN  # the translate + split path applies (module docstring)
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

    def _pieces(self, texts: Iterable[str]) -> _Pieces:
        """Every piece of these texts and the tokens in each: the fast split, or the regex text by text."""
        lowered = [t.lower() for t in texts] if self.lower else list(texts)
        split = self._split
        if self._fast:
            joined = f" {_BREAK_WORD} ".join(lowered).encode("utf-8", _LONE)
            if joined.count(_BREAK_WORD.encode()) == max(len(lowered) - 1, 0):  # no text holds the break word
                pieces = joined.translate(_TO_SPACES).split()
                distinct = set(pieces).difference(_NOT_TOKENS)
                ascii_ = [p for p in distinct if p.isascii()]
                others = {p: split(p.decode("utf-8", _LONE)) for p in distinct if not p.isascii()}
                # all ASCII pieces decoded by one call: they hold no whitespace, so split() parts them again
                return _Pieces(pieces, None, ascii_, b" ".join(ascii_).decode().split(), others)
        per_text = [split(t) for t in lowered]
        owner = np.repeat(np.arange(len(lowered), dtype=np.int64), list(map(len, per_text)))
        words: list[str] = list(chain.from_iterable(per_text))
        distinct_words = list(set(words))
        return _Pieces(words, owner, distinct_words, distinct_words, {})

    def _stems(self, distinct: set[str]) -> dict[str, str | None]:
        """The memo surface -> stem (None: stopword), extended by these distinct surface tokens."""
        memo = self._stem_cache
        new = distinct.difference(memo)
        if new:
            words = [w for w in new if w not in self.stopwords]
            memo.update(dict.fromkeys(new & self.stopwords))
            if self._stemmer is None:
                memo.update(zip(words, words, strict=True))
            else:
                memo.update(zip(words, self._stemmer.stemWords(words), strict=True))
        return memo

    def token_array(self, texts: Iterable[str], vocab: dict[str, int], *, grow: bool) -> tuple[np.ndarray, np.ndarray]:
        """Every kept token as (text position, token id) int64 arrays, by text and in text order.

        Ids are under `vocab` (token -> id). With `grow`, unseen tokens get the next ids, in sorted order
        (for documents); without, they are dropped (for queries: a term no document has matches nothing).
        """
        split = self._pieces(texts)
        surface = set(split.words)
        surface.update(chain.from_iterable(split.others.values()))
        memo = self._stems(surface)
        if grow:
            unseen = {stem for stem in map(memo.__getitem__, surface) if stem is not None} - vocab.keys()
            vocab.update(zip(sorted(unseen), range(len(vocab), len(vocab) + len(unseen)), strict=True))
        # a stopword's stem is None, which is no key: get(None, -1) is -1, like a stem no document has
        get = cast("Callable[[str | None, int], int]", vocab.get)
        code: dict[object, int] = dict(
            zip(split.keys, map(get, map(memo.__getitem__, split.words), repeat(-1)), strict=True)
        )
        several: list[list[int]] = []
        for p, tokens in split.others.items():
            ids_of = [i for t in tokens if (i := get(memo[t], -1)) >= 0]
            code[p] = ids_of[0] if len(ids_of) == 1 else -1 if not ids_of else -3 - len(several)
            if len(ids_of) > 1:
                several.append(ids_of)
        pieces, owner = split.pieces, split.owner
        if owner is None:
            code.update(_NOT_TOKENS)
        ids = np.fromiter(map(code.__getitem__, pieces), dtype=np.int64, count=len(pieces))
        if owner is None:
            owner = np.cumsum(ids == -2)  # a break word starts the next text (and is dropped below)
        at = np.flatnonzero(ids >= 0)
        if not several:
            return owner[at], ids[at]
        return _expand(owner, ids, at, several)

    def tokenize_ids(self, texts: Iterable[str], vocab: dict[str, int], *, grow: bool) -> list[list[int]]:
        """Token ids per text under `vocab`, as `token_array` assigns them (an empty list for no tokens)."""
        if not isinstance(texts, Sequence):  # a generator is read once, and its length is needed below
            texts = list(texts)
        owner, ids = self.token_array(texts, vocab, grow=grow)
        bounds = [0, *np.cumsum(np.bincount(owner, minlength=len(texts))).tolist()]
        flat = ids.tolist()
        return [flat[a:b] for a, b in pairwise(bounds)]

    def tokenize(self, texts: Iterable[str]) -> list[list[str]]:
        """Token lists, one per text; a text with no tokens gives an empty list."""
        vocab: dict[str, int] = {}
        ids = self.tokenize_ids(texts, vocab, grow=True)
        stems = list(vocab)
        return [[stems[i] for i in toks] for toks in ids]

    def __call__(self, texts: Iterable[str]) -> list[list[str]]:
        return self.tokenize(texts)
