"""Structured judge answers: find the JSON object, validate it, or say why it cannot be used.

A verdict is either a validated value or a status. Statuses (never numbers): `judge_error` (the call
failed), `judge_timeout` (it timed out), `unparseable` (an answer came back but holds no valid
verdict). Counted as "judged N of M" wherever verdicts are summarised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

STATUSES = ("ok", "judge_error", "judge_timeout", "unparseable")


def json_objects(text: str) -> Iterable[dict[str, Any]]:
    """Every JSON object embedded in `text`, in order (models wrap JSON in prose or code fences)."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def parse_grade(text: str, key: str = "grade", low: int = 0, high: int = 3) -> tuple[int | None, str]:
    """`{"grade": N}` with N an integer in [low, high] -> (N, "ok"); else (None, "unparseable").

    A bare integer answer ("2") is accepted too: it is unambiguous. Anything else is not guessed at.
    """
    for obj in json_objects(text):
        value = obj.get(key)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            continue
        if low <= int(value) <= high:
            return int(value), "ok"
    bare = text.strip().strip("`").strip()
    if bare.isdigit() and low <= int(bare) <= high:
        return int(bare), "ok"
    return None, "unparseable"


def parse_fields(text: str, required: tuple[str, ...]) -> tuple[dict[str, str] | None, str]:
    """The first JSON object whose `required` fields are all non-empty strings, else unparseable."""
    for obj in json_objects(text):
        if all(isinstance(obj.get(f), str) and obj[f].strip() for f in required):
            return {f: obj[f].strip() for f in required}, "ok"
    return None, "unparseable"


# -- the judged answer metrics' verdicts (metrics/judged.py) --------------------------------------------
def _flag(value: Any) -> bool | None:
    """1/0, true/false, "yes"/"no" -> bool; anything else None (never guessed)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "0", "yes", "no", "true", "false"):
        return value.strip().lower() in ("1", "yes", "true")
    return None


def parse_flag(text: str, key: str) -> tuple[bool | None, str]:
    """`{key: 1}` / `{key: 0}` (or true/false, "yes"/"no") -> (bool, "ok"); else (None, "unparseable")."""
    for obj in json_objects(text):
        flag = _flag(obj.get(key))
        if flag is not None:
            return flag, "ok"
    return None, "unparseable"


def parse_strings(text: str, key: str, allow_empty: bool = True) -> tuple[list[str] | None, str]:
    """`{key: ["...", ...]}` -> (the non-blank strings, "ok"); a list holding a non-string is unparseable."""
    for obj in json_objects(text):
        items = obj.get(key)
        if isinstance(items, list) and all(isinstance(s, str) for s in items):
            kept = [s.strip() for s in items if s.strip()]
            if kept or allow_empty:
                return kept, "ok"
    return None, "unparseable"


def parse_flags(text: str, key: str = "verdicts") -> tuple[list[bool] | None, str]:
    """`{key: [1, 0, ...]}` -> ([True, False, ...], "ok"); an item that is not a verdict makes it unparseable.

    Items may also be objects carrying the verdict (`{"verdict": 1}` or `{"supported": true}`), a shape
    models often choose; the caller checks the length against the statements it sent.
    """
    for obj in json_objects(text):
        items = obj.get(key)
        if not isinstance(items, list):
            continue
        flags = [_flag(i.get("verdict", i.get("supported")) if isinstance(i, dict) else i) for i in items]
        if all(f is not None for f in flags):
            return [bool(f) for f in flags], "ok"
    return None, "unparseable"


def parse_scored(text: str, lists: tuple[str, ...] = (), strings: tuple[str, ...] = ()) -> tuple[dict | None, str]:
    """`{"score": 0-5, <lists>: [str...], <strings>: str}` -> (that dict, "ok"); missing lists count as empty.

    The score must be an integer from 0 to 5; a named string field must be present (it may be empty).
    """
    for obj in json_objects(text):
        score, status = parse_grade(json.dumps({"grade": obj.get("score")}), high=5)
        if status != "ok":
            continue
        out: dict[str, Any] = {"score": score}
        ok = True
        for name in lists:
            items = obj.get(name, [])
            ok = ok and isinstance(items, list) and all(isinstance(s, str) for s in items)
            out[name] = (
                [s.strip() for s in items if isinstance(s, str) and s.strip()] if isinstance(items, list) else []
            )
        for name in strings:
            ok = ok and isinstance(obj.get(name), str)
            out[name] = str(obj.get(name, "")).strip()
        if ok:
            return out, "ok"
    return None, "unparseable"
