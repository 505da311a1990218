"""One loader for every config file, and the typed blocks every study shares.

Every config error names the file, the line and the field (`configs/x.yaml:12: field
'systems[1].params.k3': ...`): `load` reads the YAML once, remembers the line of every field from the
node tree, and gives any `ConfigError` raised while a study parses the data the line of the field it
names (the nearest enclosing field when the exact one has no line of its own, e.g. a missing key).

The blocks (`DatasetSpec`, `SystemSpec`, `EncoderSettings`) check their own fields and hold their
defaults in exactly one place, so every study reads a dataset or a system the same way; the
`evaluation:` block is parsed here (`parse_eval_settings`) into `EvalSettings`, which lives below
(`retbench.metrics.settings`, re-exported by `retbench.evaluation`) and holds the evaluation defaults.
"""

from __future__ import annotations

import inspect
import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from retbench.errors import ConfigError
from retbench.io.files import read_yaml, require_file
from retbench.metrics.settings import MODES, NO_RELEVANT, EvalSettings
from retbench.retrievers.base import resolve_factory
from retbench.retrievers.encoders.encoder import Encoder

T = TypeVar("T")


# -- where each field is -----------------------------------------------------------------------------
def field_lines(text: str) -> dict[str, int]:
    """Line (1-based) of every field of a YAML document: {"systems[1].params.k3": 12, ...}."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    out: dict[str, int] = {}

    def walk(node: Any, where: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = f"{where}.{key.value}" if where else str(key.value)
                out.setdefault(name, key.start_mark.line + 1)
                walk(value, name)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                name = f"{where}[{i}]"
                out.setdefault(name, item.start_mark.line + 1)
                walk(item, name)

    if root is not None:
        out["<top>"] = root.start_mark.line + 1
        walk(root, "")
    return out


_PARENT = re.compile(r"(\.[^.\[\]]+|\[\d+\])$")


def line_of(lines: Mapping[str, int], fld: str | None) -> int | None:
    """The line of `fld`, else of the nearest enclosing field that has one."""
    while fld:
        if fld in lines:
            return lines[fld]
        parent = _PARENT.sub("", fld)
        if parent == fld:
            break
        fld = parent
    return None


def locate(exc: ConfigError, source: str, lines: Mapping[str, int], prefix: str = "") -> ConfigError:
    """The same error naming `source`, the line of its field, and the field under `prefix`."""
    if exc.path not in (None, source) or exc.line is not None:
        return exc
    fld = exc.field
    if prefix and fld and not fld.startswith(prefix):
        fld = f"{prefix}.{fld}"
    return ConfigError(exc.reason, path=source, line=line_of(lines, fld), field=fld)


def load(path: str | Path, parse: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Read a YAML config and `parse(data, source, *args, **kwargs)`; its errors gain file:line."""
    source = str(path)
    data = read_yaml(path)
    try:
        return parse(data, source, *args, **kwargs)
    except ConfigError as exc:
        lines = field_lines(require_file(path).read_text(encoding="utf-8"))
        raise locate(exc, source, lines) from None


# -- small checks ------------------------------------------------------------------------------------
def require(cond: bool, msg: str, source: str, fld: str) -> None:
    if not cond:
        raise ConfigError(msg, path=source, field=fld)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def positive_int(v: Any, source: str, fld: str, *, optional: bool = False) -> Any:
    """`v` when it is an integer >= 1 (or None when optional)."""
    require((optional and v is None) or (is_int(v) and v > 0), f"must be a positive integer, got {v!r}", source, fld)
    return v


def mapping(v: Any, source: str, fld: str) -> dict[str, Any]:
    require(v is None or isinstance(v, Mapping), "must be a mapping", source, fld)
    return dict(v or {})


def known_keys(
    obj: Mapping[str, Any],
    allowed: set[str] | frozenset[str],
    source: str | None,
    where: str,
    line: int | None = None,
) -> None:
    """Every key of a config block is one it knows; the first unknown one is named as `where.key`."""
    extra = sorted(set(obj) - set(allowed), key=str)
    if extra:
        fld = f"{where}.{extra[0]}" if where else str(extra[0])
        msg = f"unknown key {extra[0]!r}; allowed: {', '.join(sorted(allowed))}"
        raise ConfigError(msg, path=source, line=line, field=fld)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": is_int,
    "float": _is_number,
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "None": lambda v: v is None,
    "list": lambda v: isinstance(v, list),
    "Sequence": lambda v: isinstance(v, list),
    "dict": lambda v: isinstance(v, Mapping),
    "Mapping": lambda v: isinstance(v, Mapping),
}


def check_types(cls: type, block: Mapping[str, Any], source: str | None, where: str) -> None:
    """Each value of `block` has the type its dataclass field declares (int, float, bool, str, None,
    list, mapping, or a union of them), so a bad setting is a config error before any work starts."""
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in block:
            continue
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        checks = [_TYPE_CHECKS.get(alt.strip().split("[")[0]) for alt in ann.split("|")]
        if any(c is None for c in checks):
            continue  # a type this check does not know: the block's own check() covers it
        v = block[f.name]
        if not any(c(v) for c in checks if c is not None):
            fld = f"{where}.{f.name}" if where else f.name
            raise ConfigError(f"must be {ann.replace(' | None', ' or null')}, got {v!r}", path=source, field=fld)


def folder_name(name: str) -> bool:
    """A name usable as one folder of a results directory."""
    return not re.search(r"[/\\\x00-\x1f\x7f]", name) and name.strip() not in ("", ".", "..")


# -- datasets ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DatasetSpec:
    """One dataset of a study: a shipped name, a BEIR folder or `hf:<name>`, and how much of it to use.

    `max_queries` is a seeded random sample of the judged queries (the same in every study, see
    `sample_ids`); `corpus_sample` keeps every judged document of those queries plus random others.
    """

    spec: str
    split: str = "test"
    max_queries: int | None = None
    corpus_sample: int | None = None
    join_rule: str = "title_space_text"
    seed: int = 0

    KEYS = frozenset({"name", "path", "hf", "split", "max_queries", "corpus_sample", "join_rule", "seed"})

    @property
    def label(self) -> str:
        """The dataset's column in a leaderboard and the first part of its results keys ("<label>/<system>")."""
        name = Path(self.spec).name if "/" in self.spec else self.spec.removeprefix("hf:")
        return name if self.split == "test" else f"{name}-{self.split}"

    @classmethod
    def from_config(cls, raw: Any, source: str, where: str, *, seed: int = 0) -> DatasetSpec:
        if isinstance(raw, str):
            raw = {"name": raw}
        require(isinstance(raw, Mapping), "a dataset is a name or a mapping", source, where)
        known_keys(raw, cls.KEYS, source, where)
        spec = raw.get("path") or (f"hf:{raw['hf']}" if raw.get("hf") else None) or raw.get("name")
        require(isinstance(spec, str) and bool(spec), "give a dataset name, path or hf", source, f"{where}.name")
        split = raw.get("split", "test")
        require(isinstance(split, str) and folder_name(split), "split must be a plain name", source, f"{where}.split")
        join_rule = raw.get("join_rule", "title_space_text")
        require(isinstance(join_rule, str), "join_rule must be a name", source, f"{where}.join_rule")
        ds_seed = raw.get("seed", seed)
        require(is_int(ds_seed), f"seed must be an integer, got {ds_seed!r}", source, f"{where}.seed")
        return cls(
            spec=spec,
            split=split,
            max_queries=positive_int(raw.get("max_queries"), source, f"{where}.max_queries", optional=True),
            corpus_sample=positive_int(raw.get("corpus_sample"), source, f"{where}.corpus_sample", optional=True),
            join_rule=join_rule,
            seed=ds_seed,
        )


def sample_ids(ids: list[str], n: int | None, seed: int | random.Random) -> list[str]:
    """`n` of `ids` drawn at random with `seed`, in their original order (all of them when n is None).

    Every study selects its queries through here, so `max_queries: 50, seed: 0` picks the same
    queries in `run`, `chunking` and `ingest-impact`. A `random.Random` may be passed to go on
    drawing from it afterwards (the corpus sample of `retbench run` does).
    """
    if not n or n >= len(ids):
        return list(ids)
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    keep = set(rng.sample(ids, n))
    return [q for q in ids if q in keep]


# -- systems -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SystemSpec:
    """One retriever of a study: an adapter, its parameters (checked against the factory) and a name.

    `extra` holds optional blocks a study or stage adds (for example a `rerank:` block), keyed by name;
    they are validated by whoever declares them in `extra_keys`.
    """

    name: str
    adapter: str
    params: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    KEYS = frozenset({"name", "adapter", "params"})

    @classmethod
    def from_config(cls, raw: Any, source: str, where: str, *, extra_keys: frozenset[str] = frozenset()) -> SystemSpec:
        require(isinstance(raw, Mapping), "a system is a mapping with 'adapter'", source, where)
        known_keys(raw, cls.KEYS | extra_keys, source, where)
        adapter = raw.get("adapter")
        require(isinstance(adapter, str) and bool(adapter), "missing adapter", source, f"{where}.adapter")
        name = str(raw.get("name") or adapter)
        require(
            folder_name(name),
            "a system name cannot be empty or contain '/', '\\' or control characters (tabs, newlines)",
            source,
            f"{where}.name",
        )
        params = mapping(raw.get("params"), source, f"{where}.params")
        check_adapter(adapter, params, source, where)
        return cls(name, adapter, params, {k: raw[k] for k in extra_keys if k in raw})

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "adapter": self.adapter, "params": self.params}
        return out | self.extra


def check_adapter(adapter: str, params: Mapping[str, Any], source: str, where: str) -> None:
    """The adapter exists and takes every named parameter (before any work starts)."""
    try:
        factory = resolve_factory(adapter)
    except ConfigError as exc:
        raise ConfigError(exc.reason, path=source, field=f"{where}.adapter") from None
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    valid = [
        n for n, p in sig.parameters.items() if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    for key in params:
        require(
            key in valid,
            f"unknown parameter {key!r} for adapter {adapter!r}; valid: {', '.join(valid) or 'none'}",
            source,
            f"{where}.params.{key}",
        )


def system_list(raw: Any, source: str, where: str = "systems", **kw: Any) -> list[SystemSpec]:
    """A non-empty list of systems with unique names."""
    require(isinstance(raw, list) and len(raw) > 0, "list at least one system", source, where)
    out: list[SystemSpec] = []
    for i, s in enumerate(raw):
        spec = SystemSpec.from_config(s, source, f"{where}[{i}]", **kw)
        require(
            all(o.name != spec.name for o in out), f"duplicate system name {spec.name!r}", source, f"{where}[{i}].name"
        )
        out.append(spec)
    return out


# -- evaluation --------------------------------------------------------------------------------------
def parse_eval_settings(raw: Any, source: str, where: str = "evaluation") -> EvalSettings:
    """The `evaluation:` block as `EvalSettings` (which lives with `evaluate`); errors name the field."""
    block = mapping(raw, source, where)
    known_keys(block, {f.name for f in fields(EvalSettings)}, source, where)
    check_types(EvalSettings, block, source, where)
    s = EvalSettings(**block)
    positive_int(s.relevance_level, source, f"{where}.relevance_level")
    positive_int(s.default_k, source, f"{where}.default_k")
    positive_int(s.bootstrap, source, f"{where}.bootstrap")
    require(is_int(s.seed), f"must be an integer, got {s.seed!r}", source, f"{where}.seed")
    require(s.mode in MODES, f"must be one of {', '.join(MODES)}, got {s.mode!r}", source, f"{where}.mode")
    require(
        s.no_relevant in NO_RELEVANT,
        f"must be one of {', '.join(NO_RELEVANT)}, got {s.no_relevant!r}",
        source,
        f"{where}.no_relevant",
    )
    return s


# -- encoders ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EncoderSettings:
    """Keyword arguments of `retbench.retrievers.encoders.Encoder`, checked against its signature."""

    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, raw: Any, source: str, where: str = "encoder") -> EncoderSettings:
        block = mapping(raw, source, where)
        params = inspect.signature(Encoder.__init__).parameters
        known_keys(block, {n for n in params if n != "self"}, source, where)
        for key in ("batch_size", "shard_size"):
            if key in block:
                positive_int(block[key], source, f"{where}.{key}")
        if "max_seq_length" in block:
            positive_int(block["max_seq_length"], source, f"{where}.max_seq_length", optional=True)
        for key in ("normalize", "cache"):
            if key in block:
                require(isinstance(block[key], bool), "must be true or false", source, f"{where}.{key}")
        return cls(block)

    def create(self) -> Any:
        return Encoder(**self.options)
