"""What counts as a leaked secret: any run of `PIECE` consecutive characters of it, in any known encoding.

A secret is leaked in part when a reader learns a stretch of it. Six characters is the threshold: a
shorter stretch (the `sk-` of an API key, a two-letter user name) occurs by chance in ordinary text
and hashes and tells next to nothing, while six characters of a random key are some 36 bits of it.
For each window of `PIECE` characters the needles are its spellings: verbatim, JSON `\\uXXXX` (either
hex case), percent-encoded, hex of its UTF-8 bytes (12 hex digits: six bytes), and base64 (standard
and URL-safe) at each of the three offsets it can have in a longer encoded text, keeping only the
base64 characters all of whose bits come from the window (7 or 8 of them).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path

from repo_paths import SRC, SUPPORT

PIECE = 6


def base64_core(raw: bytes, shift: int, urlsafe: bool = False) -> str:
    """The base64 characters that spell `raw` alone when it starts at byte offset `shift` (mod 3)."""
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    full = encode(b"\0" * shift + raw).decode()
    return full[-(-8 * shift // 6) : 8 * (shift + len(raw)) // 6]


def u_escaped(text: str, upper: bool = False) -> str:
    return "".join(f"\\u{ord(c):04X}" if upper else f"\\u{ord(c):04x}" for c in text)


def spellings(piece: str) -> dict[str, str]:
    """{encoding: how `piece` is spelled in it}."""
    raw = piece.encode()
    out = {
        "verbatim": piece,
        "json": json.dumps(piece)[1:-1].replace("/", "\\/"),
        "\\u lower": u_escaped(piece),
        "\\u upper": u_escaped(piece, upper=True),
        "percent": urllib.parse.quote(piece, safe=""),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
    }
    for shift in range(3):
        out[f"base64 offset {shift}"] = base64_core(raw, shift)
        out[f"base64url offset {shift}"] = base64_core(raw, shift, urlsafe=True)
    return out


def needles(secrets: Mapping[str, str]) -> dict[str, str]:
    """{spelling of a piece: 'name[i:j] encoding'} for every `PIECE`-character window of every secret."""
    out: dict[str, str] = {}
    for name, secret in secrets.items():
        for i in range(len(secret) - PIECE + 1):
            for enc, spelled in spellings(secret[i : i + PIECE]).items():
                out.setdefault(spelled, f"{name}[{i}:{i + PIECE}] {enc}")
    return out


def leaks(texts: Mapping[str, str], secrets: Mapping[str, str]) -> list[str]:
    """'<piece> in <where>' for each piece of a secret found in any of `texts` ({where: text})."""
    found = needles(secrets)
    return [f"{what} in {where}" for where, text in texts.items() for s, what in found.items() if s in text]


def files_under(*roots: Path, skip: Iterable[str] = (".yaml", ".npy")) -> dict[str, str]:
    """{path: text} of every file under `roots` (configs the test wrote itself and arrays left out)."""
    skipped = tuple(skip)
    return {
        str(p): p.read_bytes().decode("utf-8", "replace")
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(skipped)
    }


def run_cli(cwd: Path, *args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess:
    """`retbench ARGS` as a subprocess in `cwd` (its own model cache under it, offline), both streams kept."""
    full = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
        "RETBENCH_CACHE": str(cwd / "cache"),
        "HF_HUB_OFFLINE": "1",
        **env,
    }
    cmd = [sys.executable, "-m", "retbench.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=600, cwd=cwd)
