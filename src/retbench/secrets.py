"""Secrets: read from environment variables only, and redacted from everything retbench writes.

Every secret retbench reads (a token named by `auth_env`, `token_env`, `api_key_env` or `headers_env`)
is registered here. `redact(text)` replaces each registered secret in every form a backend or a
serializer may echo it in: verbatim, JSON-escaped (`\\"`, `\\\\`, `\\/`, `\\uXXXX`), URL-encoded (either
hex case, `+` for spaces), HTML-escaped and base64 (standard, URL-safe, padded or not: an echoed
`Authorization: Basic` header). Writers call it on the full text *before* cutting it to length, so a
secret cut at a truncation boundary never leaks a prefix. One function, used by every writer: the JSON
and status files, the journal, stress failure logs and reports, and the CLI's error line.
"""

from __future__ import annotations

import base64
import html
import json
import re
import threading
import urllib.parse

MASK = "***"
_MIN_LEN = 4  # shorter "secrets" would mask ordinary words
_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None

# header names and values that carry credentials; such values must come from the environment
_SECRET_HEADER = re.compile(r"auth|token|key|secret|pass|cookie|session|credential|signature", re.I)
_SECRET_VALUE = re.compile(
    r"^\s*(bearer|basic|token|digest)\s+\S"  # an auth scheme and its credentials
    r"|^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_\-+/=.]{24,}$",  # a long token of letters and digits (API keys, JWTs)
    re.I,
)


def _forms(secret: str) -> set[str]:
    """Every spelling of one secret retbench or a backend may write."""
    raw = secret.encode("utf-8")
    forms = {secret, html.escape(secret)}
    for esc in (json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]):
        forms.update({esc, esc.replace("/", "\\/")})
    for quoted in (urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret, safe="")):
        forms.update({quoted, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quoted)})
    for b64 in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms.update({b64, b64.rstrip("=")})
    return {f for f in forms if len(f) >= _MIN_LEN}


def register(secret: str | None) -> None:
    """Remember a secret so that every writer masks it (and a `user:pass` pair's password too)."""
    global _pattern
    if not secret or len(secret) < _MIN_LEN:
        return
    with _lock:
        new = {secret}
        if ":" in secret:
            new.add(secret.split(":", 1)[1])
        if new <= _secrets:
            return
        _secrets.update(new)
        forms = sorted({f for s in _secrets for f in _forms(s)}, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(f) for f in forms))


def redact(text: str) -> str:
    """The text with every registered secret, in every encoding above, replaced by `***`."""
    pattern = _pattern
    return pattern.sub(MASK, text) if pattern is not None and text else text


def clip(text: str, limit: int) -> str:
    """Redact, then cut to `limit` characters (in that order, so a cut never exposes part of a secret)."""
    text = redact(text)
    return text if len(text) <= limit else text[:limit] + "..."


def public_url(url: str) -> str:
    """The URL without `user:pass@` (what may be written to manifests, metrics and errors)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def has_userinfo(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.username is not None or parts.password is not None


def looks_secret(name: str, value: object) -> bool:
    """Whether a literal header (name, value) from a config looks like a credential."""
    return bool(_SECRET_HEADER.search(name)) or (isinstance(value, str) and bool(_SECRET_VALUE.search(value)))
