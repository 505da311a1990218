"""Dense retrieval: the cached Encoder and the FAISS-backed retriever, on a small SciFact slice.

Kept fast on shared CPUs: 120 documents, max_seq_length 64, one embedding cache for the session
(full-corpus numbers live in benchmarks/).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from retbench.data import Corpus
from retbench.errors import ConfigError, InputError
from retbench.retrievers import create
from retbench.retrievers.dense import DenseRetriever
from retbench.retrievers.encoders import EmbeddingCache, Encoder, default_cache_dir, default_model, fingerprint_folder

pytestmark = pytest.mark.slow
MAX_LEN = 64


@pytest.fixture(scope="session")
def emb_cache(tmp_path_factory):
    """One embedding cache for the whole session (test_hybrid uses the same folder)."""
    return tmp_path_factory.getbasetemp() / "retbench-embeddings"


@pytest.fixture(scope="module")
def docs(scifact) -> Corpus:
    return scifact.corpus.subset(scifact.corpus.ids[:120])


@pytest.fixture(scope="module")
def claims(scifact, docs) -> list[str]:
    qrels = scifact.split("test")
    return [scifact.queries[q] for q in qrels if set(qrels[q]) & set(docs.ids)][:12]


def dense(emb_cache, **params) -> DenseRetriever:
    r = create("dense", {"max_seq_length": MAX_LEN, "cache_dir": str(emb_cache), **params})
    assert isinstance(r, DenseRetriever)
    return r


@pytest.fixture(scope="module")
def flat(emb_cache, docs) -> DenseRetriever:
    r = dense(emb_cache)
    r.index(docs)
    return r


# -- Encoder and cache -------------------------------------------------------------------------
def test_rerun_encodes_nothing_and_one_new_doc_encodes_one(emb_cache, docs):
    texts = docs.joined_texts()
    first = Encoder(max_seq_length=MAX_LEN, cache_dir=emb_cache)
    a = first.encode_documents(texts)
    assert a.shape == (120, 384) and a.dtype == np.float32
    assert first.stats.encoded + first.stats.cached == 120

    again = Encoder(max_seq_length=MAX_LEN, cache_dir=emb_cache)
    b = again.encode_documents(texts)
    assert (again.stats.encoded, again.stats.cached) == (0, 120)
    assert again._model is None  # a warm re-run does not even load the model
    np.testing.assert_array_equal(a, b)

    c = again.encode_documents([*texts, "A document about zebrafish fin regeneration the cache has not seen."])
    assert again.stats.encoded == 1
    np.testing.assert_array_equal(c[:120], a)
    assert np.linalg.norm(c[120]) == pytest.approx(1.0, abs=1e-5)


def test_interrupted_encode_resumes_from_completed_shards(tmp_path, emb_cache, docs, monkeypatch):
    texts = docs.joined_texts()[:24]
    enc = Encoder(max_seq_length=MAX_LEN, cache_dir=tmp_path, shard_size=8)
    real, calls = enc._encode_batch, []

    def dies_on_third_shard(batch: list[str], role: str) -> np.ndarray:
        calls.append(len(batch))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(batch, role)

    monkeypatch.setattr(enc, "_encode_batch", dies_on_third_shard)
    with pytest.raises(KeyboardInterrupt):
        enc.encode_documents(texts)
    resumed = Encoder(max_seq_length=MAX_LEN, cache_dir=tmp_path, shard_size=8)
    out = resumed.encode_documents(texts)
    assert resumed.stats.encoded == 24 - 16  # two shards of 8 survived the crash
    uninterrupted = Encoder(max_seq_length=MAX_LEN, cache_dir=emb_cache).encode_documents(texts)
    np.testing.assert_allclose(out, uninterrupted, atol=1e-5)


def test_repeats_in_one_call_are_encoded_once(tmp_path):
    enc = Encoder(max_seq_length=MAX_LEN, cache_dir=tmp_path)
    out = enc.encode_queries(["aspirin lowers fever", "aspirin lowers fever", "statins and muscle pain"])
    assert (enc.stats.encoded, enc.stats.cached) == (2, 1)
    assert enc.stats.by_role["query"] == {"encoded": 2, "cached": 1}
    np.testing.assert_array_equal(out[0], out[1])


def test_prefix_is_prepended_and_keys_its_own_cache(tmp_path):
    plain = Encoder(max_seq_length=MAX_LEN, cache_dir=tmp_path)
    prefixed = Encoder(max_seq_length=MAX_LEN, cache_dir=tmp_path, query_prefix="query: ")
    text = "Vitamin D prevents fractures"
    got = prefixed.encode_queries([text])
    assert prefixed.stats.encoded == 1
    plain.encode_queries([text])
    assert plain.stats.encoded == 1  # same text, other settings: not served from the prefixed cache
    model = prefixed.model
    model.max_seq_length = MAX_LEN
    np.testing.assert_allclose(got[0], model.encode(["query: " + text], normalize_embeddings=True)[0], atol=1e-5)
    assert not np.allclose(got[0], plain.encode_queries([text])[0], atol=1e-3)
    assert len({p.name for p in tmp_path.iterdir()}) == 2  # one namespace folder per setting


def test_fingerprint_reads_files_and_ignores_the_readme(tmp_path):
    src = default_model()
    base = fingerprint_folder(src)
    assert base == Encoder().fingerprint and len(base) == 16
    copy = tmp_path / "model"
    for f in sorted(p for p in Path(src).rglob("*") if p.is_file()):
        dest = copy / f.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(f, dest)
    assert fingerprint_folder(copy) == base
    (copy / "README.md").unlink()
    (copy / "README.md").write_text("edited model card")
    assert fingerprint_folder(copy) == base
    (copy / "sentence_bert_config.json").unlink()
    (copy / "sentence_bert_config.json").write_text('{"max_seq_length": 128, "do_lower_case": false}')
    assert fingerprint_folder(copy) != base


def test_max_seq_length_and_token_counts():
    enc = Encoder()
    assert enc.max_seq_length == 256 and enc._model is None  # read from the model folder, no load
    assert Encoder(max_seq_length=32).max_seq_length == 32
    assert enc.count_tokens(["hello world", ""]) == [2, 0]
    assert enc.count_tokens(["hello world"], special_tokens=True) == [4]  # [CLS] hello world [SEP]
    assert enc.dimension == 384


def test_cache_shards_compact_and_ignore_torn_writes(tmp_path):
    cache = EmbeddingCache(tmp_path)
    vecs = np.arange(12, dtype=np.float32).reshape(4, 3)
    keys = [bytes([i]) * 20 for i in range(4)]  # b"\x00" * 20 included: trailing zero bytes must survive
    cache.append(keys[:2], vecs[:2])
    cache.append(keys[2:], vecs[2:])
    (tmp_path / "torn.vecs.npy").write_bytes(b"half a file")  # vectors written, keys never were
    again = EmbeddingCache(tmp_path)
    got = again.lookup([*keys, b"x" * 20])
    assert len(got) == 4 and again.n_shards == 2
    np.testing.assert_array_equal(got[keys[3]], vecs[3])
    again.compact()
    assert again.n_shards == 1 and len(list(tmp_path.glob("*.keys.npy"))) == 1
    np.testing.assert_array_equal(EmbeddingCache(tmp_path).lookup([keys[1]])[keys[1]], vecs[1])


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "embeddings"
    monkeypatch.delenv("RETBENCH_CACHE")
    monkeypatch.chdir(tmp_path)
    assert default_cache_dir() == tmp_path / ".retbench-cache" / "embeddings"


# -- retriever ---------------------------------------------------------------------------------
def test_flat_ip_is_exact_inner_product(flat, docs, claims, emb_cache):
    enc = Encoder(max_seq_length=MAX_LEN, cache_dir=emb_cache)
    scores = enc.encode_queries(claims) @ enc.encode_documents(docs.joined_texts()).T
    for row, ranking in zip(scores, flat.search_batch(claims, 10), strict=True):
        best = np.argsort(-row)[:10]
        assert [d for d, _ in ranking] == [docs.ids[i] for i in best]
        np.testing.assert_allclose([s for _, s in ranking], row[best], atol=1e-5)
        assert all(type(d) is str and type(s) is float for d, s in ranking)


def test_a_document_is_its_own_nearest_neighbour(flat, docs):
    texts = docs.joined_texts()[:5]
    for doc_id, ranking in zip(docs.ids[:5], flat.search_batch(texts, 3), strict=True):
        assert ranking[0][0] == doc_id
        assert ranking[0][1] == pytest.approx(1.0, abs=1e-4)


def test_flat_l2_scores_are_negated_squared_distances(emb_cache, docs, claims, flat):
    l2 = dense(emb_cache, index="flat_l2")
    l2.index(docs)
    for ip_rank, l2_rank in zip(flat.search_batch(claims, 5), l2.search_batch(claims, 5), strict=True):
        assert [d for d, _ in ip_rank] == [d for d, _ in l2_rank]  # unit vectors: same order
        # |q - d|^2 = 2 - 2 q.d for unit vectors
        np.testing.assert_allclose([s for _, s in l2_rank], [2 * s - 2 for _, s in ip_rank], atol=1e-4)


def test_ann_indexes_against_exact_search(emb_cache, docs, claims, flat):
    exact = [{d for d, _ in r} for r in flat.search_batch(claims, 10)]

    ivf = dense(emb_cache, index="ivf", nlist=4, nprobe=4)  # probing every list is exhaustive
    ivf.index(docs)
    for got, want in zip(ivf.search_batch(claims, 10), flat.search_batch(claims, 10), strict=True):
        assert [d for d, _ in got] == [d for d, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-5)

    hnsw = dense(emb_cache, index="hnsw", M=16, ef_search=64)
    hnsw.index(docs)
    found = [{d for d, _ in r} for r in hnsw.search_batch(claims, 10)]
    assert np.mean([len(a & b) / 10 for a, b in zip(exact, found, strict=True)]) >= 0.9

    pq = dense(emb_cache, index="ivfpq", nlist=2, nprobe=2, pq_m=16)
    pq.index(docs)
    assert pq.describe()["pq_nbits"] == 6  # 120 training points cannot train 2**8 codes: clamped, and said so
    found = [{d for d, _ in r} for r in pq.search_batch(claims, 10)]
    assert np.mean([len(a & b) / 10 for a, b in zip(exact, found, strict=True)]) >= 0.5

    with pytest.raises(ConfigError, match="pq_m"):
        dense(emb_cache, index="ivfpq", pq_m=7).index(docs)


def test_raw_arrays_pad_missing_neighbours(emb_cache, docs, claims, flat):
    ids, scores = flat.search_arrays(claims[:2], 500)
    assert ids.shape == scores.shape == (2, 120)  # k is capped at the index size
    assert scores.dtype == np.float32 and np.all(np.diff(scores, axis=1) <= 1e-6)

    ivf = dense(emb_cache, index="ivf", nlist=4, nprobe=1)
    ivf.index(docs)
    ids, scores = ivf.search_arrays(claims[:1], 120)
    missing = [i for i, d in enumerate(ids[0]) if d is None]
    assert missing and np.all(np.isneginf(scores[0][missing]))
    assert len(ivf.search_batch(claims[:1], 120)[0]) == 120 - len(missing)


@pytest.mark.parametrize("index", ["flat_ip", "ivf", "hnsw"])
def test_add_encodes_only_new_docs_and_delete_removes(emb_cache, docs, index):
    r = dense(emb_cache, index=index, nlist=2, nprobe=2)
    r.index(docs.subset(docs.ids[:100]))
    r.add(docs.subset(docs.ids[100:]))
    assert len(r) == 120
    before = r.encoder.stats.by_role["document"]["encoded"]
    # a text no other test (or parametrization) has put in the session cache
    novel = Corpus(["zebrafish-1"], [f"Zebrafish regenerate their fins through blastema formation ({index} test)."])
    r.add(novel)
    assert r.encoder.stats.by_role["document"]["encoded"] - before == 1
    assert r.search_batch(["zebrafish fin regeneration blastema"], 1)[0][0][0] == "zebrafish-1"

    gone = docs.ids[:5]
    r.delete([*gone, "no-such-id"])
    assert len(r) == 116
    hits = {d for ranking in r.search_batch(docs.joined_texts()[:5], 20) for d, _ in ranking}
    assert not hits & set(gone)
    assert ("rebuild" in r.describe()["delete"]) == (index == "hnsw")

    r.add(Corpus(["zebrafish-1"], ["Statins cause muscle pain in some patients."]))  # same id: replaced
    assert len(r) == 116
    assert r.search_batch(["zebrafish fin regeneration blastema"], 1)[0][0][0] != "zebrafish-1"


@pytest.mark.parametrize("index", ["flat_ip", "hnsw"])
def test_save_load_round_trip(tmp_path, emb_cache, docs, claims, index):
    r = dense(emb_cache, index=index)
    r.index(docs)
    r.delete(docs.ids[:2])
    r.save(tmp_path / "idx")
    loaded = dense(emb_cache, index=index, ef_search=128)  # a search-time setting may differ
    loaded.load(tmp_path / "idx")
    assert loaded.search_batch(claims, 10) == r.search_batch(claims, 10)
    assert len(loaded) == 118

    with pytest.raises(ConfigError, match="index"):
        dense(emb_cache, index="ivf").load(tmp_path / "idx")
    with pytest.raises(ConfigError, match="encoder"):
        create("dense", {"max_seq_length": 32, "cache_dir": str(emb_cache), "index": index}).load(tmp_path / "idx")
    with pytest.raises(InputError, match="not a saved"):
        dense(emb_cache).load(tmp_path)


def test_contract_inputs_untouched_and_errors(emb_cache, docs, flat):
    ids, texts = list(docs.ids), list(docs.texts)
    queries = ["What reduces inflammation?"]
    flat.search_batch(queries, 3)
    assert (list(docs.ids), list(docs.texts), queries) == (ids, texts, ["What reduces inflammation?"])
    with pytest.raises(InputError, match="no index"):
        dense(emb_cache).search_batch(["x"], 3)
    with pytest.raises(InputError, match="repeated"):
        dense(emb_cache).index(Corpus(["a", "a"], ["x", "y"]))
    with pytest.raises(ConfigError, match="index"):
        create("dense", {"index": "annoy"})
    with pytest.raises(ConfigError, match="implies"):
        create("dense", {"index": "flat_ip", "metric": "l2"})
    desc = flat.describe()
    assert desc["encoder"]["model_fingerprint"] == flat.fingerprint() and desc["encoder"]["max_seq_length"] == MAX_LEN


# -- streaming: the corpus reaches the encoder and the index a batch at a time -------------------
class _Recording(Encoder):
    """The packaged model, remembering how many texts each encode call was handed."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.calls: list[int] = []

    def encode(self, texts, role="document"):
        self.calls.append(len(texts))
        return super().encode(texts, role)


class _Streamed(Corpus):
    """A corpus that refuses to be turned into one list of every text."""

    def joined_texts(self) -> list[str]:
        raise AssertionError("the whole corpus was materialized as one list of texts")


@pytest.mark.parametrize("kind", ["flat_ip", "hnsw", "ivf"])
def test_indexing_reads_the_corpus_in_batches_and_builds_the_index_built_from_all_vectors_at_once(
    emb_cache, docs, monkeypatch, kind
):
    import faiss

    from retbench.retrievers.encoders import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "STREAM_TEXTS", 50)  # batches of 40 (two shards of 20), so 3 batches
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # HNSW's multi-threaded build is not deterministic; one thread is
    try:
        enc = _Recording(max_seq_length=MAX_LEN, cache_dir=emb_cache, shard_size=20)
        streamed = DenseRetriever(encoder=enc, index=kind)
        streamed.index(_Streamed(docs.ids, docs.texts, docs.titles, docs.metadata))
        at_once = DenseRetriever(encoder=Encoder(max_seq_length=MAX_LEN, cache_dir=emb_cache), index=kind)
        at_once.index_embeddings(docs.ids, at_once.encoder.encode_documents(docs.joined_texts()), docs.metadata)
    finally:
        faiss.omp_set_num_threads(threads)
    assert enc.calls == [40, 40, 40]
    assert streamed.doc_ids == at_once.doc_ids
    assert bytes(faiss.serialize_index(streamed._faiss_index)) == bytes(faiss.serialize_index(at_once._faiss_index))


def test_filling_the_cache_plans_shards_one_corpus_batch_at_a_time_and_indexing_then_encodes_nothing(
    tmp_path, docs, monkeypatch
):
    from retbench.retrievers.encoders import encoder as encoder_module
    from retbench.studies.executors import InProcess, shard_stream

    monkeypatch.setattr(encoder_module, "STREAM_TEXTS", 50)
    enc = _Recording(max_seq_length=MAX_LEN, cache_dir=tmp_path, shard_size=20)
    corpus = _Streamed(docs.ids[:100], docs.texts[:100], docs.titles[:100])
    plan = list(shard_stream(enc, corpus))
    # 100 documents read 40 at a time: shards of at most 20, none mixing two corpus batches
    assert [len(s) for s in plan] == [20, 20, 20, 20, 20]
    assert [sorted(plan[0] + plan[1]), sorted(plan[2] + plan[3])] == [
        sorted(corpus.joined(i) for i in range(0, 40)),
        sorted(corpus.joined(i) for i in range(40, 80)),
    ]
    report = InProcess().encode_corpus(DenseRetriever(encoder=enc), corpus)
    assert report["encoded"] == 100 and enc.calls == [20] * 5
    enc.stats.reset()
    DenseRetriever(encoder=enc).index(corpus)
    assert enc.stats.encoded == 0 and enc.stats.cached == 100
