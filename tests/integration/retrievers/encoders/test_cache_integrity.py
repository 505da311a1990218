"""Embedding cache integrity: a damaged shard is named, set aside and re-encoded, never used.

Shards are written by the real Encoder (the packaged all-MiniLM-L6-v2) over a real SciFact slice, then
damaged on disk the ways disks and people damage files; every test checks that the scores a dense
retriever gives afterwards are the scores of the undamaged cache.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from retbench.errors import BackendError
from retbench.retrievers import create
from retbench.retrievers.encoders import EmbeddingCache, Encoder
from retbench.retrievers.encoders.cache import _digest

pytestmark = pytest.mark.slow
MAX_LEN = 64


@pytest.fixture(scope="module")
def docs(scifact):
    return scifact.corpus.subset(scifact.corpus.ids[:20])


@pytest.fixture(scope="module")
def claims(scifact) -> list[str]:
    qrels = scifact.split("test")
    return [scifact.queries[q] for q in list(qrels)[:6]]


@pytest.fixture(scope="module")
def clean(tmp_path_factory, docs, claims):
    """A cache folder written by the real Encoder (4 shards of 5 documents) and the scores it gives."""
    root = tmp_path_factory.mktemp("clean-cache")
    Encoder(max_seq_length=MAX_LEN, cache_dir=root, shard_size=5).encode_documents(docs.joined_texts())
    return root, search(root, docs, claims)


def search(cache_dir: Path, docs, claims) -> list[list[tuple[str, float]]]:
    r = create("dense", {"max_seq_length": MAX_LEN, "cache_dir": str(cache_dir)})
    r.index(docs)
    return r.search_batch(claims, 10)


def doc_shards(root: Path) -> list[Path]:
    """The vectors files of the document-role namespace, in a fixed order."""
    return sorted(p for p in root.rglob("*.vecs.npy"))


def flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(len(data) - 200, len(data), 7):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def zero_rows(path: Path) -> None:
    arr = np.load(path)
    arr[1:3] = 0
    np.save(path, arr)


def reorder_rows(path: Path) -> None:
    arr = np.load(path)
    np.save(path, arr[::-1].copy())


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def truncate_keys(path: Path) -> None:
    truncate(path.with_name(path.name.replace(".vecs.npy", ".keys.npy")))


DAMAGE = {
    "flipped bytes": flip_bytes,
    "zero-filled rows": zero_rows,
    "reordered rows": reorder_rows,
    "truncated vectors": truncate,
    "truncated keys": truncate_keys,
}


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_damaged_shard_is_named_set_aside_and_re_encoded_and_scores_are_unchanged(
    how, clean, docs, claims, tmp_path, caplog
):
    root, want = clean
    cache_dir = tmp_path / "cache"
    shutil.copytree(root, cache_dir)
    victim = doc_shards(cache_dir)[1]
    DAMAGE[how](victim)

    with caplog.at_level(logging.WARNING, logger="retbench.cache"):
        got = search(cache_dir, docs, claims)

    assert [[d for d, _ in r] for r in got] == [[d for d, _ in r] for r in want]
    np.testing.assert_allclose([[s for _, s in r] for r in got], [[s for _, s in r] for r in want], atol=1e-5)
    assert str(victim) in caplog.text and "set aside" in caplog.text
    assert victim.with_name(victim.name + ".damaged").exists()  # kept for inspection, not deleted
    assert not victim.exists()
    # the re-encoded shard is good: a second run neither warns nor encodes
    caplog.clear()
    enc = Encoder(max_seq_length=MAX_LEN, cache_dir=cache_dir)
    with caplog.at_level(logging.WARNING, logger="retbench.cache"):
        enc.encode_documents(docs.joined_texts())
    assert (enc.stats.encoded, enc.stats.cached) == (0, 20) and caplog.text == ""


def test_vectors_with_nan_or_infinity_are_refused_when_written(tmp_path):
    cache = EmbeddingCache(tmp_path)
    keys = [bytes([i]) * 20 for i in range(3)]
    for bad in (np.nan, np.inf, -np.inf):
        vecs = np.ones((3, 4), dtype=np.float32)
        vecs[1, 2] = bad
        with pytest.raises(ValueError, match="NaN or infinite"):
            cache.append(keys, vecs)
    assert list(tmp_path.iterdir()) == []


def test_a_shard_holding_nan_with_a_matching_checksum_is_still_never_used(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path)
    keys = [bytes([i]) * 20 for i in range(3)]
    cache.append(keys, np.ones((3, 4), dtype=np.float32))
    (vecs_file,) = tmp_path.glob("*.vecs.npy")
    arr = np.load(vecs_file)
    arr[0, 0] = np.nan
    np.save(vecs_file, arr)
    sum_file = vecs_file.with_name(vecs_file.name.replace(".vecs.npy", ".sum"))
    keys_file = vecs_file.with_name(vecs_file.name.replace(".vecs.npy", ".keys.npy"))
    sum_file.write_text(sum_file.read_text().split('"sha256"')[0] + f'"sha256": "{_digest(keys_file, vecs_file)}"}}')
    with caplog.at_level(logging.WARNING, logger="retbench.cache"):
        assert EmbeddingCache(tmp_path).lookup(keys) == {}
    assert "NaN" in caplog.text and str(vecs_file) in caplog.text


def test_an_encoder_returning_nan_is_a_backend_error_not_a_missing_document(tmp_path, monkeypatch, docs):
    enc = Encoder(max_seq_length=MAX_LEN, cache_dir=tmp_path)
    real = enc._encode_batch

    def one_nan(texts: list[str], role: str) -> np.ndarray:
        vecs = real(texts, role)
        vecs[0, 0] = np.nan
        return vecs

    monkeypatch.setattr(enc, "_encode_batch", one_nan)
    with pytest.raises(BackendError, match="NaN or infinite"):
        enc.encode_documents(docs.joined_texts()[:3])
    assert not list(tmp_path.rglob("*.sum"))
