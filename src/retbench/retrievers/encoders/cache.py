"""The on-disk embedding cache: append-only shards keyed by the sha1 of each text, each shard checksummed."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retbench.io.files import replace_atomically, save_array

_KEY_BYTES = 20  # sha1 digest
_SUFFIXES = (".vecs.npy", ".keys.npy", ".sum")
log = logging.getLogger("retbench.cache")


class DamagedShard(ValueError):
    """A shard whose files do not match the checksum written with them."""


def default_cache_dir() -> Path:
    """`$RETBENCH_CACHE/embeddings` when set, else `.retbench-cache/embeddings` under the current dir."""
    root = os.environ.get("RETBENCH_CACHE")
    return (Path(root) if root else Path.cwd() / ".retbench-cache") / "embeddings"


def text_key(text: str) -> bytes:
    """The cache key of one text: its sha1 digest (20 bytes)."""
    return hashlib.sha1(text.encode("utf-8")).digest()


def _digest(keys_file: Path, vecs_file: Path) -> str:
    """sha256 over the keys file then the vectors file: ties every vector row to its key row."""
    h = hashlib.sha256()
    for path in (keys_file, vecs_file):
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _check_finite(vectors: np.ndarray, where: str) -> None:
    bad = ~np.isfinite(vectors).all(axis=1) if vectors.ndim == 2 else np.array([True])
    if bad.any():
        raise ValueError(f"{where}: {int(bad.sum())} vector(s) with NaN or infinite values (row {int(bad.argmax())})")


class EmbeddingCache:
    """Append-only embedding shards in one folder (one folder per model + settings namespace).

    A shard is `<name>.vecs.npy` (float32, n x dim), `<name>.keys.npy` (n x 20 uint8: sha1 digests) and
    `<name>.sum` (JSON: rows, dim and the sha256 of the keys file followed by the vectors file). Each
    file is written by rename and the `.sum` last, so a shard exists only once it is complete; a crash
    leaves at most stray files that no `.sum` names. On reading, a shard whose bytes do not match its
    checksum (flipped bytes, zeroed, reordered or truncated rows) or that holds a non-finite vector is
    never used: it is named in a warning, renamed to `<file>.damaged` (kept for inspection) and its
    texts are encoded again. Several processes may append to the same folder: shard names are unique
    and each reader picks up new shards on its next lookup. Shards from before checksums (no `.sum`)
    are ignored, so their texts are encoded again once.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._seen: set[str] = set()
        self._blocks: list[np.ndarray] = []
        self._where: dict[bytes, tuple[int, int]] = {}
        self.dim: int | None = None
        self.damaged: list[Path] = []  # shards set aside by this instance

    def _load_shard(self, stem: str) -> tuple[np.ndarray, np.ndarray]:
        """Keys and vectors of one shard, verified against its checksum; DamagedShard otherwise."""
        vecs_file, keys_file, sum_file = (self.folder / f"{stem}{s}" for s in _SUFFIXES)
        try:
            expected = json.loads(sum_file.read_text(encoding="utf-8"))
            rows, dim, digest = int(expected["rows"]), int(expected["dim"]), str(expected["sha256"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DamagedShard(f"unreadable checksum file ({exc})") from exc
        try:
            actual = _digest(keys_file, vecs_file)
        except OSError as exc:
            raise DamagedShard(f"missing or unreadable shard file ({exc})") from exc
        if actual != digest:
            raise DamagedShard("contents do not match the checksum written with them")
        try:
            keys = np.load(keys_file)
            vecs = np.load(vecs_file, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise DamagedShard(f"unreadable array ({exc})") from exc
        if keys.shape != (rows, _KEY_BYTES) or vecs.shape != (rows, dim) or vecs.dtype != np.float32:
            raise DamagedShard(f"shape {vecs.shape}/{keys.shape} differs from the {rows} x {dim} recorded")
        try:
            _check_finite(np.asarray(vecs), "vectors")
        except ValueError as exc:
            raise DamagedShard(str(exc)) from exc
        return keys, vecs

    def _set_aside(self, stem: str, reason: str) -> None:
        """Rename a damaged shard's files to `*.damaged` (never deleted: they may be evidence)."""
        log.warning("embedding cache: shard %s set aside and re-encoded: %s", self.folder / f"{stem}.vecs.npy", reason)
        for suffix in _SUFFIXES:
            path = self.folder / f"{stem}{suffix}"
            if path.exists():
                target = path.with_name(path.name + ".damaged")
                path.replace(target)
                self.damaged.append(target)

    def refresh(self) -> None:
        """Load shards written since the last look (by this or another process)."""
        for sum_file in sorted(self.folder.glob("*.sum")):
            stem = sum_file.name[: -len(".sum")]
            if stem in self._seen:
                continue
            self._seen.add(stem)  # remembered either way: a bad shard is not re-read on every lookup
            try:
                keys, vecs = self._load_shard(stem)
            except DamagedShard as exc:
                self._set_aside(stem, str(exc))
                continue
            block = len(self._blocks)
            self._blocks.append(vecs)
            self.dim = int(vecs.shape[1])
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

    def contains(self, keys: Sequence[bytes]) -> set[bytes]:
        """The keys that are cached (no vectors touched)."""
        self.refresh()
        return {k for k in keys if k in self._where}

    def append(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Write one shard atomically; vectors with NaN or infinite values are refused (ValueError)."""
        if len(keys) == 0:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(keys) != len(vectors):
            raise ValueError("keys and vectors differ in length")
        if any(len(k) != _KEY_BYTES for k in keys):
            raise ValueError(f"cache keys are {_KEY_BYTES}-byte digests")
        _check_finite(vectors, "embedding cache: refusing to store")
        stem = f"{uuid.uuid4().hex}"
        # keys as raw uint8 rows: numpy's fixed-width bytes dtype would strip a digest's trailing zero bytes
        key_rows = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), _KEY_BYTES)
        for suffix, arr in ((".vecs.npy", vectors), (".keys.npy", key_rows)):
            save_array(self.folder / f"{stem}{suffix}", arr)
        summary = {
            "rows": len(keys),
            "dim": int(vectors.shape[1]),
            "sha256": _digest(self.folder / f"{stem}.keys.npy", self.folder / f"{stem}.vecs.npy"),
        }
        replace_atomically(
            self.folder / f"{stem}.sum", lambda tmp: tmp.write_text(json.dumps(summary), encoding="utf-8")
        )
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
            for suffix in (".sum", ".keys.npy", ".vecs.npy"):
                (self.folder / f"{stem}{suffix}").unlink(missing_ok=True)
        self._seen.difference_update(old)
