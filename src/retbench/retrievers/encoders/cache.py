"""The on-disk embedding cache: append-only shards keyed by the sha1 of each text."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

_KEY_BYTES = 20  # sha1 digest


def default_cache_dir() -> Path:
    """`$RETBENCH_CACHE/embeddings` when set, else `.retbench-cache/embeddings` under the current dir."""
    root = os.environ.get("RETBENCH_CACHE")
    return (Path(root) if root else Path.cwd() / ".retbench-cache") / "embeddings"


def text_key(text: str) -> bytes:
    """The cache key of one text: its sha1 digest (20 bytes)."""
    return hashlib.sha1(text.encode("utf-8")).digest()


class EmbeddingCache:
    """Append-only embedding shards in one folder (one folder per model + settings namespace).

    A shard is `<name>.vecs.npy` (float32, n x dim) plus `<name>.keys.npy` (n x 20 uint8: sha1 digests). The
    vectors are written first and the keys file last, each by rename, so a shard exists only once it
    is complete; a crash leaves at most a stray temporary file. Several processes may append to the
    same folder: shard names are unique and each reader picks up new shards on its next lookup.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._seen: set[str] = set()
        self._blocks: list[np.ndarray] = []
        self._where: dict[bytes, tuple[int, int]] = {}
        self.dim: int | None = None

    def refresh(self) -> None:
        """Load shards written since the last look (by this or another process)."""
        for keys_file in sorted(self.folder.glob("*.keys.npy")):
            stem = keys_file.name[: -len(".keys.npy")]
            if stem in self._seen:
                continue
            vecs = np.load(self.folder / f"{stem}.vecs.npy", mmap_mode="r")
            keys = np.load(keys_file)
            self._seen.add(stem)  # remembered either way: a foreign shard is not re-read on every lookup
            if keys.ndim != 2 or keys.shape[1] != _KEY_BYTES or len(keys) != len(vecs):
                continue  # not a shard this code wrote; ignore rather than serve wrong vectors
            block = len(self._blocks)
            self._blocks.append(vecs)
            self.dim = int(vecs.shape[1]) if vecs.ndim == 2 else self.dim
            flat = keys.tobytes()
            for row in range(len(keys)):
                self._where.setdefault(flat[row * _KEY_BYTES : (row + 1) * _KEY_BYTES], (block, row))

    def __len__(self) -> int:
        return len(self._where)

    @property
    def n_shards(self) -> int:
        return len(self._blocks)

    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors of the keys that are cached (missing keys are absent from the result)."""
        self.refresh()
        out: dict[bytes, np.ndarray] = {}
        for k in keys:
            hit = self._where.get(k)
            if hit is not None:
                out[k] = self._blocks[hit[0]][hit[1]]
        return out

    def append(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Write one shard atomically."""
        if len(keys) == 0:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(keys) != len(vectors):
            raise ValueError("keys and vectors differ in length")
        stem = f"{uuid.uuid4().hex}"
        if any(len(k) != _KEY_BYTES for k in keys):
            raise ValueError(f"cache keys are {_KEY_BYTES}-byte digests")
        # keys as raw uint8 rows: numpy's fixed-width bytes dtype would strip a digest's trailing zero bytes
        key_rows = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), _KEY_BYTES)
        for suffix, arr in ((".vecs.npy", vectors), (".keys.npy", key_rows)):
            tmp = self.folder / f".{stem}{suffix}.tmp"
            with open(tmp, "wb") as fh:
                np.save(fh, arr)
            tmp.replace(self.folder / f"{stem}{suffix}")
        self.refresh()

    def compact(self) -> None:
        """Merge all shards into one (tiny shards pile up as documents trickle in).

        Not for use while another process reads or writes this folder.
        """
        self.refresh()
        if len(self._blocks) <= 1:
            return
        old = sorted(self._seen)
        keys = list(self._where)
        vecs = np.stack([self._blocks[b][r] for b, r in (self._where[k] for k in keys)])
        self._seen, self._blocks, self._where = set(old), [], {}
        self.append(keys, vecs)
        for stem in old:
            for suffix in (".keys.npy", ".vecs.npy"):
                (self.folder / f"{stem}{suffix}").unlink(missing_ok=True)
        self._seen.difference_update(old)
