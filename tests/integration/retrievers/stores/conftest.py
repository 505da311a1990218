"""Fixtures every vector-store test module shares: the SciFact slice and FAISS flat references over it."""

from __future__ import annotations

import pytest

from retbench.retrievers.base import create
from stores_support import ENC, scifact_slice


@pytest.fixture(scope="module")
def data():
    """(corpus, queries, qrels) of a seeded SciFact slice."""
    return scifact_slice()


@pytest.fixture(scope="module")
def ref(data):
    """FAISS flat runs over the same Encoder vectors, by metric (`ip`, `l2`): the exact reference."""
    corpus, queries, _ = data
    runs = {}
    for metric in ("ip", "l2"):
        r = create("dense", {"index": f"flat_{metric}", **ENC})
        r.index(corpus)
        runs[metric] = r.search(queries, 10)
    return runs
