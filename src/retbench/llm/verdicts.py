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
