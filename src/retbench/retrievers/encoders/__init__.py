"""Sentence embeddings with an on-disk cache: nothing is encoded twice.

`Encoder` wraps a sentence-transformers model (a local folder or a hub name; default the packaged
all-MiniLM-L6-v2) and answers `encode_documents(texts)` / `encode_queries(texts)` with float32
arrays. Every text goes through an `EmbeddingCache` keyed by

    (model fingerprint, settings that change the vector, sha1 of the text)

where the settings are the role's prefix or prompt name, normalization and max sequence length
(batch size and device do not change a vector, so they are not part of the key). The cache is a
folder of append-only shards, each written atomically once its texts are encoded, so:

- a re-run encodes nothing (and does not even load the model: the fingerprint of a local model is
  read from its files);
- adding one document encodes one document;
- an interrupted encode resumes from the last completed shard.

`encoder.stats` counts texts run through the model (`encoded`) and texts answered without it
(`cached`: cache hits and repeats within one call). Chunking, ingestion and the vector stores use
this same class, so their vectors agree with the dense retriever's.

Other encoder kinds subclass `Encoder` and keep its cache: `http` (an OpenAI-compatible
`/v1/embeddings` server), `onnx` (an .onnx graph run by onnxruntime) and `static` (WordLlama);
`create_encoder({"kind": ..., ...})` builds one from a config block (the dense retriever's `encoder:`).
"""

from retbench.retrievers.encoders.cache import EmbeddingCache, default_cache_dir, text_key
from retbench.retrievers.encoders.encoder import (
    ENCODER_KINDS,
    Encoder,
    EncodeStats,
    create_encoder,
    default_model,
    fingerprint_folder,
)

__all__ = [
    "ENCODER_KINDS",
    "EmbeddingCache",
    "EncodeStats",
    "Encoder",
    "create_encoder",
    "default_cache_dir",
    "default_model",
    "fingerprint_folder",
    "text_key",
]
