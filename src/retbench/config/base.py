"""The base of every config model, and pydantic's errors turned into `field 'a.b[1].c': message`.

Every block of every config kind is a `Block`: strict types (a string is not an integer, `true` is
not a number, NaN and infinities are refused), unknown keys refused with the valid ones listed and
the nearest one suggested, and a value outside a closed set of choices (a literal, an enum, a
kind) gets the nearest choice suggested too. Validation is declared on the models; `validate` runs it and raises the
first problem as a `ConfigError` naming the field, which `load` then gives its file and line.

Paths inside a config are read relative to the config file's folder (then `$RETBENCH_CACHE`),
never the working directory: `validate(..., base=folder)` passes the folder to the path fields
(`ConfigPath`, `ModelFile`) through pydantic's validation context.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from retbench.config.env import check_env
from retbench.errors import ConfigError
from retbench.secrets import clip

M = TypeVar("M", bound=BaseModel)

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
NonNegativeFloat = Annotated[float, Field(ge=0.0)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0)]


class Block(BaseModel):
    """A config block: strict, closed (unknown keys are errors naming the valid ones), finite numbers."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: object) -> object:
        """An unknown key names the keys this block takes and the nearest one (a misspelling)."""
        if isinstance(data, Mapping) and cls.model_config.get("extra") == "forbid":
            allowed = sorted(f.alias or n for n, f in cls.model_fields.items())
            for key in data:
                if key not in allowed:
                    msg = unknown_key_message(key, allowed).replace("{", "{{").replace("}", "}}")
                    raise PydanticCustomError("unknown_key", msg, {"key": str(key)})
        return data


def field_error(fld: str, message: str) -> PydanticCustomError:
    """An error a model validator raises about one of its fields (`fld`, relative to the model)."""
    return PydanticCustomError("field_error", message.replace("{", "{{").replace("}", "}}"), {"field": fld})


def nearest(value: object, choices: Sequence[str]) -> str | None:
    """The choice `value` most likely misspells (case, `-` for `_` and small typos forgiven), or None."""
    if not isinstance(value, str) or not choices:
        return None

    def norm(text: str) -> str:
        return text.lower().replace("-", "_").replace(" ", "_")

    same = [c for c in choices if norm(c) == norm(value) and c != value]
    if same:
        return same[0]
    by_norm = {norm(c): c for c in choices}
    near = difflib.get_close_matches(norm(value), list(by_norm), n=1, cutoff=0.6)
    return by_norm[near[0]] if near and by_norm[near[0]] != value else None


def did_you_mean(value: object, choices: Sequence[str]) -> str:
    """`; did you mean 'x'?` when `value` looks like a misspelt choice, else empty."""
    near = nearest(value, choices)
    return f"; did you mean {near!r}?" if near is not None else ""


def unknown_key_message(key: object, allowed: list[str]) -> str:
    """`unknown key 'x'; allowed: a, b; did you mean 'a'?`."""
    return f"unknown key {key!r}; allowed: {', '.join(allowed)}" + did_you_mean(str(key), allowed)


def _choices(expected: object) -> list[str]:
    """The values of pydantic's `expected` text (`'a', 'b' or 'c'`; an enum's `'x' or 'y'`)."""
    return re.findall(r"'((?:[^'\\]|\\.)*)'", str(expected or ""))


# -- paths ---------------------------------------------------------------------------------------------
def cache_root() -> Path | None:
    """`$RETBENCH_CACHE` when set (heavy files: models, embeddings)."""
    root = os.environ.get("RETBENCH_CACHE")
    return Path(root) if root else None


def resolve_path(value: str, base: Path | None) -> tuple[Path, list[Path]]:
    """(the path to use, every place tried): absolute as written; relative against `base`, then the cache.

    A relative path that starts with `.retbench-cache/` is also looked up inside `$RETBENCH_CACHE`,
    so a config written for the default cache folder works with a cache that lives elsewhere.
    """
    p = Path(value).expanduser()
    if p.is_absolute() or base is None:
        return p, [p]
    tried = [Path(os.path.abspath(base / p))]
    cache = cache_root()
    if cache is not None:
        tried.append(Path(os.path.abspath(cache / p)))
        if p.parts and p.parts[0] == ".retbench-cache" and len(p.parts) > 1:
            tried.append(Path(os.path.abspath(cache.joinpath(*p.parts[1:]))))
    for cand in tried:
        if cand.exists():
            return cand, tried
    return tried[0], tried


def config_folder(info: ValidationInfo) -> Path | None:
    """The folder relative paths are read from (the config file's), as `validate` passed it."""
    ctx = info.context
    return ctx.get("base") if isinstance(ctx, Mapping) else None


def _config_path(value: str, info: ValidationInfo) -> str:
    return str(resolve_path(value, config_folder(info))[0])


def _model_file(value: str, info: ValidationInfo) -> str:
    found, tried = resolve_path(value, config_folder(info))
    if not found.is_file():
        where = ", ".join(str(t) for t in tried)
        raise ValueError(
            f"model file not found (looked for {where}; a relative path is read from the config's folder, "
            "then from $RETBENCH_CACHE)"
        )
    return str(found)


#: a file or folder a config names: relative to the config's folder (or the cache), never the working directory
ConfigPath = Annotated[str, Field(min_length=1), AfterValidator(_config_path)]
#: a local model file: resolved like ConfigPath, and it must exist before any work starts
ModelFile = Annotated[str, Field(min_length=1), AfterValidator(_model_file)]


# -- errors --------------------------------------------------------------------------------------------
def field_name(loc: tuple[object, ...], data: object) -> str:
    """`('systems', 1, 'params', 'k3')` -> `systems[1].params.k3`, dropping pydantic's union tags.

    A union's location carries the name of the member tried (`str`, `DatasetBlock`, a discriminator
    value); it is recognised as a step that is not a key or index of the data at that point.
    """
    out = ""
    node = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            out += f"[{part}]"
            node = node[part]
        elif isinstance(node, Mapping) and part in node:
            out = f"{out}.{part}" if out else str(part)
            node = node[part]
        elif last and not isinstance(part, int):
            out = f"{out}.{part}" if out else str(part)
        # else: a union member's tag; the data stays where it is
    return out


def _describe(value: object) -> str:
    """The value as an error shows it: redacted, then cut (a URL's password cut short would not be recognised)."""
    return clip(repr(value), 80)


_YAML11_WORDS = {True: ("on", "yes", "true", "y"), False: ("off", "no", "false", "n")}


def yaml_bool_hint(got: object, choices: Sequence[str] = ()) -> str:
    """The hint for a boolean given where text is expected: YAML 1.1 (PyYAML) reads unquoted on/off/yes/no as
    true/false, so `folder_mode: on` arrives as True; the quoted word is suggested (a valid choice if one fits)."""
    if not isinstance(got, bool):
        return ""
    word = next((w for w in _YAML11_WORDS[got] if w in choices), _YAML11_WORDS[got][0])
    return f"; YAML reads unquoted on/off/yes/no as true/false: quote it ('{word}')"


def error_message(err: ErrorDetails) -> str:
    """A person's sentence for one pydantic error (the valid choices where there are some)."""
    kind, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    message = _error_message(kind, ctx, got, err)
    if kind in ("literal_error", "enum", "string_type"):
        message += yaml_bool_hint(got, _choices(ctx.get("expected")) if ctx.get("expected") else ())
    return message


def _error_message(kind: str, ctx: dict[str, Any], got: object, err: ErrorDetails) -> str:
    if kind in ("unknown_key", "field_error"):
        return str(err["msg"])
    if kind == "missing":
        return "is required"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    if kind == "assertion_error":
        return str(ctx.get("error", err["msg"]))
    if kind in ("literal_error", "enum"):
        expected = ctx.get("expected")
        return f"must be one of {expected}, got {_describe(got)}" + did_you_mean(got, _choices(expected))
    simple = {
        "int_type": "must be an integer",
        "int_from_float": "must be an integer",
        "int_parsing": "must be an integer",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "finite_number": "must be a finite number",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "string_type": "must be a string",
        "list_type": "must be a list",
        "dict_type": "must be a mapping",
        "model_type": "must be a mapping",
        "model_attributes_type": "must be a mapping",
    }
    if kind in simple:
        return f"{simple[kind]}, got {_describe(got)}"
    bounds = {
        "greater_than_equal": ("ge", ">="),
        "greater_than": ("gt", ">"),
        "less_than_equal": ("le", "<="),
        "less_than": ("lt", "<"),
    }
    if kind in bounds:
        key, op = bounds[kind]
        return f"must be {op} {ctx.get(key)}, got {_describe(got)}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "too_short":
        n = ctx.get("min_length")
        return "must be a non-empty list" if n == 1 else f"needs at least {n} items, got {ctx.get('actual_length')}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tags, tag = ctx.get("expected_tags"), ctx.get("tag")
        return f"must be one of {tags}, got {_describe(tag)}" + did_you_mean(tag, _choices(tags))
    return f"{err['msg']}, got {_describe(got)}"


def first_error(exc: ValidationError, data: object, source: str | None, prefix: str = "") -> ConfigError:
    """The first problem of a failed validation as a ConfigError naming its field (under `prefix`)."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    loc = tuple(err["loc"])
    if err["type"] == "unknown_key":
        loc = (*loc, (err.get("ctx") or {}).get("key", ""))
    elif err["type"] in ("union_tag_invalid", "union_tag_not_found"):  # name the discriminator: `kind`
        loc = (*loc, str((err.get("ctx") or {}).get("discriminator", "")).strip("'"))
    fld = field_name(loc, data)
    if err["type"] == "field_error":
        sub = str((err.get("ctx") or {}).get("field", ""))
        fld = f"{fld}{sub}" if sub.startswith("[") else f"{fld}.{sub}" if fld and sub else fld or sub
    if prefix:
        fld = f"{prefix}.{fld}" if fld else prefix
    return ConfigError(error_message(err), path=source, field=fld or "<top>")


def validate(
    model: type[M],
    data: object,
    source: str | None = None,
    *,
    base: Path | None = None,
    prefix: str = "",
) -> M:
    """`data` validated by `model`; the first problem is a ConfigError naming the field.

    `base` is the folder relative paths are read from (the config file's); `prefix` the field the
    block sits under when it is part of a larger config (`judge`, `systems[0].generate.llm`). Every
    environment variable a `*_env` field of the block names must then be set; its value is
    registered as a secret (`config.env`), so a Python caller gets the checks a config file gets.
    """
    if base is None and source and not source.startswith("<"):
        base = Path(source).parent
    try:
        out = model.model_validate(data, context={"base": base})
    except ValidationError as exc:
        raise first_error(exc, data, source, prefix) from None
    check_env(data, source, prefix)
    return out
