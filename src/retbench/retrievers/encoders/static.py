"""Static embeddings (WordLlama): a vector per token, averaged; no transformer runs at encode time.

    encoder: {kind: static, model: l2_supercat, dim: 256}

WordLlama (`wordllama` 0.4.0.post1) ships its 256-dimensional `l2_supercat` weights inside the package;
they are loaded from the package folder with downloads disabled, so nothing reaches the network.
Vectors are L2-normalized when `normalize`. Hundreds of documents a second on one core, at a large
quality cost against a transformer: see `configs/encoders.yaml` and benchmarks/RESULTS.md.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject
from retbench.retrievers.encoders.encoder import Encoder


class StaticEncoder(Encoder):
    """WordLlama static embeddings from the installed package; see the module docstring."""

    kind = "static"

    def __init__(
        self,
        model: str = "l2_supercat",
        *,
        dim: int = 256,
        normalize: bool = True,
        batch_size: int = 256,
        cache: bool = True,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(
            f"wordllama:{model}:{dim}", normalize=normalize, batch_size=batch_size, cache=cache, cache_dir=cache_dir
        )
        self.config_name, self.dim = model, int(dim)
        self._wl: Any = None
        self._fp: str | None = None

    def _package_dir(self) -> Path:
        try:
            import wordllama
        except ImportError:
            raise ConfigError(
                "static encoders need the wordllama package (pip install 'retbench[encoders]')", field="kind"
            ) from None
        return Path(wordllama.__file__).parent

    @property
    def wordllama(self) -> Any:
        if self._wl is None:
            from wordllama import WordLlama

            try:
                self._wl = WordLlama.load(
                    self.config_name, cache_dir=self._package_dir(), dim=self.dim, disable_download=True
                )
            except Exception as exc:
                raise ConfigError(
                    f"cannot load WordLlama {self.config_name!r} dim {self.dim}: {exc}", field="model"
                ) from None
        return self._wl

    @property
    def fingerprint(self) -> str:
        if self._fp is None:
            weights = sorted(self._package_dir().rglob(f"{self.config_name}_{self.dim}*.safetensors"))
            h = hashlib.sha1(f"{self.config_name}:{self.dim}".encode())
            for w in weights:
                h.update(f"{w.name}:{w.stat().st_size}".encode())
            self._fp = "static-" + h.hexdigest()[:12]
        return self._fp

    @property
    def max_seq_length(self) -> int:
        return 0

    @property
    def dimension(self) -> int:
        return self.dim

    def describe(self) -> JSONObject:
        return {
            "kind": self.kind,
            "model": f"wordllama {self.config_name}",
            "dim": self.dim,
            "model_fingerprint": self.fingerprint,
            "normalize": self.normalize,
        }

    def _encode_batch(self, texts: list[str], role: str) -> np.ndarray:
        vecs = np.asarray(self.wordllama.embed(texts, norm=False, batch_size=self.batch_size), dtype=np.float32)
        if self.normalize:
            vecs /= np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return vecs
