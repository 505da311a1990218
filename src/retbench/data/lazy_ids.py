"""Where a Run's doc ids live before they are needed: the `{doc: score}` mappings it was built from
(read in place, so building a run from 10M ids does not copy 10M strings), and the interning that
turns ids into integer codes whose order is the ids' string order (trec_eval breaks score ties by it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, repeat
from typing import Protocol

import numpy as np


class LazyIds(Protocol):
    """Doc ids a Run reads only when asked (10M Python strings cost more than every metric together)."""

    def all(self) -> np.ndarray:
        """Every id, in the order the run was given them, as a new object array."""
        ...

    def take(self, positions: np.ndarray) -> np.ndarray:
        """The ids at some of those positions, as an object array."""
        ...


class IdColumn:
    """A column of ids (a qrels' judged documents) whose Python strings are made only when asked for,
    carrying the exact 64-bit keys (`data.keys`) a file reader computed for them: locating judged
    documents in a run read from a file then compares keys and never builds the judged ids' strings.

    Subsets (`column[positions]`) share the source, so the strings are made at most once."""

    def __init__(self, ids: np.ndarray | LazyIds, keys: np.ndarray | None = None, size: int | None = None) -> None:
        """`keys`: exact keys of every id (None when some id has none: longer than 8 bytes, or a NUL byte).
        `size`: the number of ids, needed when `ids` is lazy and no keys are given."""
        if isinstance(ids, np.ndarray):
            size = len(ids)
        elif size is None:
            if keys is None:
                raise ValueError("the size of a lazy id column must be given")
            size = len(keys)
        if keys is not None and len(keys) != size:
            raise ValueError("an id column needs one key per id")
        self._source: list[np.ndarray | LazyIds] = [ids]
        self._index: np.ndarray | None = None
        self._size = size
        self.keys = keys

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, positions: np.ndarray) -> IdColumn:
        positions = np.asarray(positions, dtype=np.int64)
        out = IdColumn.__new__(IdColumn)
        out._source = self._source
        out._index = positions if self._index is None else self._index[positions]
        out._size = len(positions)
        out.keys = None if self.keys is None else self.keys[positions]
        return out

    def strings(self) -> np.ndarray:
        """The ids as an object array of str (made once for the column and all its subsets)."""
        source = self._source[0]
        if not isinstance(source, np.ndarray):
            source = self._source[0] = source.all()
        return source if self._index is None else source[self._index]


_CHANGED = "the {doc: score} mappings this run was built from were changed after it was built"


class MappingIds:
    """The keys of `{doc: score}` mappings a run was built from, read in place."""

    def __init__(self, maps: list[Mapping[str, float]], offsets: np.ndarray) -> None:
        self.maps = maps
        self.offsets = offsets
        self._array: np.ndarray | None = None

    def owners(self, rows: np.ndarray) -> list[Mapping[str, float]]:
        """The mapping of each row: one NumPy gather from an object array of the mappings (built once),
        where `map(maps.__getitem__, ...)` would pay a Python-level call per row."""
        if self._array is None:
            self._array = np.empty(len(self.maps), dtype=object)
            self._array[:] = self.maps
        return self._array[rows].tolist()  # type: ignore[no-any-return]

    def unchanged(self) -> bool:
        """Whether every mapping still has the size it had when the run was built."""
        sizes = np.fromiter(map(len, self.maps), dtype=np.int64, count=len(self.maps))
        return bool(np.array_equal(sizes, np.diff(self.offsets)))

    def all(self) -> np.ndarray:
        if not self.unchanged():
            raise ValueError(_CHANGED)
        return np.fromiter(chain.from_iterable(self.maps), dtype=object, count=int(self.offsets[-1]))

    def take(self, positions: np.ndarray) -> np.ndarray:
        rows = np.searchsorted(self.offsets, positions, side="right") - 1
        out = np.empty(len(positions), dtype=object)
        keys: dict[int, list[str]] = {}
        for i, (r, o) in enumerate(zip(rows.tolist(), (positions - self.offsets[rows]).tolist(), strict=True)):
            ks = keys.get(r)
            if ks is None:
                ks = keys[r] = list(self.maps[r])
                if len(ks) != self.offsets[r + 1] - self.offsets[r]:
                    raise ValueError(_CHANGED)
            out[i] = ks[o]
        return out


def str_keyed_mappings(rankings: Sequence[Iterable[object]], plain: bool) -> bool:
    """True if every ranking is a mapping whose first key is a string (`plain` dicts are checked from C)."""
    if plain:
        return set(map(type, map(next, map(iter, rankings), repeat("")))) <= {str}
    return all(isinstance(r, Mapping) and type(next(iter(r), "")) is str for r in rankings)


def intern_ids(doc_ids: Sequence[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes for doc ids whose order equals the ids' string order (for trec_eval tie-breaking).

    Returns (vocab sorted ascending as an object array, int64 codes).
    """
    table: dict[str, int] = {}
    first = [table.setdefault(d, len(table)) for d in doc_ids]
    vocab = np.array(list(table), dtype=object)
    order = np.argsort(vocab.astype(str), kind="stable") if len(vocab) else np.zeros(0, dtype=np.int64)
    rank = np.empty(len(vocab), dtype=np.int64)
    rank[order] = np.arange(len(vocab), dtype=np.int64)
    codes = rank[np.asarray(first, dtype=np.int64)] if first else np.zeros(0, dtype=np.int64)
    return vocab[order], codes
