"""Secrets: read from environment variables only, and redacted from everything retbench writes.

Every secret retbench reads (a token named by `auth_env`, `token_env`, `api_key_env` or `headers_env`,
and the `user:pass@` of a URL it is given) is registered here. `redact(text)` masks each registered
secret however a backend or a serializer spelled it. Rather than listing spellings one by one, it
*decodes* the text and looks again: each pass undoes the escapes servers and serializers use, and a
secret found in the decoded text is masked over the original characters it came from:

- JSON / .NET / Go string escapes: `\\uXXXX` (so `\\u002B` is `+`, `\\u0026` is `&`), `\\/`, `\\"`, `\\\\`;
- HTML character references: numeric (`&#x2F;`, `&#47;`) and named (`&amp;`, `&sol;`);
- percent-encoding (either hex case, UTF-8 aware).

Up to three passes run, so an escape inside an escape (double URL-encoding `%252F`, `&amp;#x2F;`,
percent-encoding inside a JSON string) is undone too. A few spellings are not escapes and are
matched as literal forms (`_forms`): base64 (standard or URL-safe) at each of the three offsets a
secret can have in a longer encoded text (so base64 of `Bearer KEY` or of a whole `Authorization:`
header line is caught), hex of its bytes, and form encoding (`+` for a space). Every form may be
split between any two characters by whitespace or an escaped line break (`\\n`, `\\r\\n`): a key
echoed across lines, inside a JSON reply, or in a wrapped base64 block. All forms of all secrets are
one regex laid out as a trie, rebuilt only when a secret is registered, so redaction is one
left-to-right scan per decoding pass however many secrets there are.

Two kinds of credentials are masked even when nobody registered them, because they announce
themselves: the userinfo of a URL (`scheme://user:PASSWORD@host`; a lone `token@` is masked whole), a
query parameter whose name says it is secret (`?api_key=`, `&access_token=`, `sig=`...) and the
`password=` of a key=value connection string (libpq's `host=db password=...`).

Writers call `redact` on the full text *before* cutting it to length (`clip`), so a secret cut at a
truncation boundary never leaks a prefix. One function, used by the one writer every file goes through
(`io.files`), the journal, the console (log lines and every table cell) and the CLI's error line.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import html
import os
import re
import threading
import urllib.parse
from collections.abc import Iterator
from typing import TypeAlias

MASK = "***"
_MIN_LEN = 4  # shorter "secrets" would mask ordinary words
_DECODE_PASSES = 3  # escapes nested deeper than this are not undone
_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None  # every form of every secret (`_forms`), split or not (`_SEP`)

# header names and values that carry credentials; such values must come from the environment
_SECRET_HEADER = re.compile(r"auth|token|key|secret|pass|cookie|session|credential|signature", re.I)
_SECRET_VALUE = re.compile(
    r"^\s*(bearer|basic|token|digest)\s+\S"  # an auth scheme and its credentials
    r"|^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_\-+/=.]{24,}$",  # a long token of letters and digits (API keys, JWTs)
    re.I,
)
# query parameter names that carry credentials (api_key, apikey, access_token, X-Amz-Signature, sig, ...)
_SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|auth(?!or)|signature|^sig$|credential|session", re.I)

# credentials that announce themselves in any text: a URL's userinfo and secret-looking query values
_USERINFO = re.compile(r"(?<![\w+.-])[A-Za-z][\w+.-]*://([^\s/?#@\"'<>\\]+)@")
_QUERY_VALUE = re.compile(r"[?&;]([\w.\-\[\]]+)=([^&#\s\"'<>\\;]+)")
_DSN_PASSWORD = re.compile(r"(?:^|(?<=\s))(?:password|passwd|pwd)\s*=\s*('[^']*'|[^\s'\"]+)", re.I)  # libpq key=value

# one escape token (every alternative starts with a literal character, so the regex engine skips the
# characters that cannot start one): JSON \uXXXX, a JSON single-character escape, an HTML character reference, a percent run
_ESCAPE = re.compile(
    r"\\u([0-9a-fA-F]{4})"
    r"|\\([\"\\/'])"
    r"|&#[xX]([0-9a-fA-F]{1,6});?"
    r"|&#([0-9]{1,7});?"
    r"|&([A-Za-z][A-Za-z0-9]{1,31};)"
    r"|%[0-9a-fA-F]{2}(?:%[0-9a-fA-F]{2})*"  # a percent run (no group: the whole match)
)


# What may split a secret without changing it, between any two of its characters: whitespace (a line
# break, a wrapped column) and escaped line breaks and tabs (`\\n`, `\\r\\n`, `\\\\n` escaped once more).
# Possessive (nothing to give back, so no backtracking) except before a secret's own backslash.
_SEP = r"\s*(?:\\+[rnt]\s*)*+"
_SEP_BEFORE_BACKSLASH = r"\s*(?:\\+[rnt]\s*)*"
_SCHEME = re.compile(r"^\s*(?:bearer|basic|token|digest)\s+(\S+)\s*$", re.I)


def _base64_cores(raw: bytes) -> set[str]:
    """Base64 of `raw` however it sits in a longer encoded text (`Bearer KEY`, `Authorization: Basic ...`).

    Base64 turns each 3 bytes into 4 characters, so the characters that spell `raw` depend on its
    offset mod 3 in the encoded text. For each offset (0, 1, 2) this keeps the characters whose 6 bits
    all come from `raw`; the one or two characters at each end also carry bits of the text around it
    and are not part of the form (at most 4 bits of the secret each, never a whole character of it).
    """
    out = set()
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            full = encode(b"\0" * shift + raw).decode()
            out.add(full[-(-8 * shift // 6) : 8 * (shift + len(raw)) // 6])
    return out


def _forms(secret: str) -> set[str]:
    """The spellings of `secret` that decoding cannot reach (module docstring): searched in every decoded pass."""
    raw = secret.encode("utf-8")
    forms = {secret, urllib.parse.quote_plus(secret, safe=""), raw.hex(), raw.hex().upper(), *_base64_cores(raw)}
    for b64 in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms.update({b64, b64.rstrip("=")})
    return {f for f in forms if len(f) >= _MIN_LEN}


_Trie: TypeAlias = "dict[str, _Trie]"  # one character per level; "" marks the end of a form


def _compile(forms: set[str]) -> re.Pattern[str] | None:
    """One regex of every form, each allowed to be split by `_SEP` between any two characters.

    The forms are laid out as a trie (`ab|ac` as `a(?:b|c)`), so each position of a text costs one
    step per character matched, not one per form: redaction stays linear in the text whatever the
    number of secrets. Longer continuations are tried first, so the longest form wins at a position.
    """
    trie: _Trie = {}
    for form in forms:
        node = trie
        for ch in form:
            node = node.setdefault(ch, {})
        node[""] = {}
    return re.compile(_branches(trie, first=True)) if trie else None


def _branches(node: _Trie, first: bool = False) -> str:
    """The regex of one trie node's continuations (empty when a form ends here and nothing follows).

    One separator before the alternatives, not one in each: the regex engine then skips an
    alternative on its first character alone.
    """
    chars = sorted((c for c in node if c), key=lambda c: -_depth(node[c]))
    if not chars:
        return ""
    alts = [re.escape(ch) + _branches(node[ch]) for ch in chars]
    body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    if not first:
        body = (_SEP_BEFORE_BACKSLASH if "\\" in chars else _SEP) + body
    return f"(?:{body})?" if "" in node else body


def _depth(node: _Trie) -> int:
    return 1 + max((_depth(child) for child in node.values()), default=0)


def _also(secret: str) -> set[str]:
    """The parts of `secret` a server may echo alone: a `user:pass` pair's password, an auth header's
    credentials (`Bearer KEY` -> KEY; `Basic B64` -> B64, `user:pass` and the password)."""
    out = {secret}
    scheme = _SCHEME.match(secret)
    if scheme:
        out.add(scheme.group(1))
        if secret.lstrip()[:5].lower() == "basic":
            with contextlib.suppress(ValueError):  # not base64 of UTF-8 text: the token alone is the secret
                out.add(base64.b64decode(scheme.group(1), validate=True).decode("utf-8"))
    for s in list(out):
        if ":" in s and not _SCHEME.match(s):
            out.add(s.split(":", 1)[1])
    return {s for s in out if len(s) >= _MIN_LEN}


def register(secret: str | None) -> None:
    """Remember a secret so that every writer masks it (and its parts a server may echo alone, `_also`)."""
    global _pattern
    if not secret or len(secret) < _MIN_LEN:
        return
    with _lock:
        new = _also(secret)
        if new <= _secrets:
            return
        _secrets.update(new)
        _pattern = _compile({f for s in _secrets for f in _forms(s)})


def register_url(url: str | None) -> str:
    """Register a URL's credentials (userinfo, secret-looking query values); return `public_url(url)`.

    Every URL retbench is given (a judge `base_url`, a rerank or embedding `url`, a store DSN, a
    tracking URI) goes through here before it is used, so the credentials it carries are masked
    wherever a backend echoes them, and only the public form is shown or written.
    """
    if not url:
        return url or ""
    try:
        parts = urllib.parse.urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return redact(url)
    for part in (password, user if password is None else None):
        if part:
            register(urllib.parse.unquote(part))
            register(part)
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_PARAM.search(name) and value:
            register(value)
    return public_url(url)


def register_dsn(dsn: str | None) -> str:
    """Register a connection string's password; return the form that may be shown or written.

    A URL (`postgresql://user:PASSWORD@host/db`, `?password=`) goes through `register_url`; a libpq
    key=value string (`host=db password=PASSWORD`) has its `password=` value registered and masked.
    """
    if not dsn:
        return dsn or ""
    if "://" in dsn:
        return register_url(dsn)
    for m in _DSN_PASSWORD.finditer(dsn):
        value = m.group(1)
        register(value[1:-1] if value.startswith("'") else value)
    return redact(dsn)


def from_env(name: str | None) -> str | None:
    """The value of environment variable `name` (None when no name is given or it is unset), registered.

    How every client reads its key: reading and registering are one step, so a key read is never
    left out of redaction.
    """
    if not name:
        return None
    value = os.environ.get(name)
    register(value)
    return value


def request_url(url: str) -> tuple[str, dict[str, str]]:
    """(the URL to send, headers): a `user:pass@` in the URL becomes a registered Basic `Authorization` header.

    urllib does not turn userinfo into credentials; the URL sent carries none, so no error text or
    log line built from it can show them.
    """
    register_url(url)
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, {}
    userinfo = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
    register(userinfo)
    token = base64.b64encode(userinfo.encode("utf-8")).decode()
    register(token)
    netloc = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), {"Authorization": f"Basic {token}"}


# ---- decoding -------------------------------------------------------------------------------------


def _percent_units(run: str, start: int) -> Iterator[tuple[int, int, str]]:
    """(start, end, character) for each UTF-8 sequence of a `%XX%XX...` run (bytes that are not UTF-8 one by one)."""
    data = bytes.fromhex(run.replace("%", ""))
    i = 0
    while i < len(data):
        lead = data[i]
        n = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        try:
            ch = data[i : i + n].decode("utf-8")
        except UnicodeDecodeError:
            n, ch = 1, chr(lead)
        yield start + 3 * i, start + 3 * (i + n), ch
        i += n


def _units(m: re.Match[str]) -> Iterator[tuple[int, int, str]]:
    """(start, end, decoded text) for the characters one escape token stands for."""
    uni, single, hexref, decref, named = m.groups()
    if m.group(0)[0] == "%":
        yield from _percent_units(m.group(0), m.start())
        return
    if uni is not None:
        ch = chr(int(uni, 16))
    elif single is not None:
        ch = single
    elif hexref is not None or decref is not None:
        code = int(hexref, 16) if hexref is not None else int(decref)
        ch = chr(code) if 0 < code <= 0x10FFFF else m.group(0)
    else:
        ch = html.unescape("&" + named)
    yield m.start(), m.end(), ch


class _Layer:
    """One decoding pass: the decoded text and where each of its characters came from in the text before."""

    def __init__(self, text: str) -> None:
        pieces: list[str] = []
        self.dstart: list[int] = []  # decoded offset where each segment starts
        self.segs: list[tuple[int, int, bool]] = []  # (start, end) in the text before; literal or one unit
        pos = dpos = 0
        for m in _ESCAPE.finditer(text):
            if m.start() > pos:
                self.dstart.append(dpos)
                self.segs.append((pos, m.start(), True))
                pieces.append(text[pos : m.start()])
                dpos += m.start() - pos
            for a, b, ch in _units(m):
                self.dstart.append(dpos)
                self.segs.append((a, b, False))
                pieces.append(ch)
                dpos += len(ch)
            pos = m.end()
        if pos < len(text):
            self.dstart.append(dpos)
            self.segs.append((pos, len(text), True))
            pieces.append(text[pos:])
        self.text = "".join(pieces)

    def span(self, i: int) -> tuple[int, int]:
        """Where decoded character `i` came from (a whole escape token for a decoded one)."""
        k = bisect.bisect_right(self.dstart, i) - 1
        a, b, literal = self.segs[k]
        if literal:
            o = a + (i - self.dstart[k])
            return o, o + 1
        return a, b


def _secret_spans(text: str) -> Iterator[tuple[int, int]]:
    """Spans of `text` that are a registered secret (any form), a URL's userinfo or a secret query value."""
    pattern = _pattern
    if pattern is not None:
        for m in pattern.finditer(text):
            yield m.span()
    if "://" in text:
        for m in _USERINFO.finditer(text):
            user_end = m.group(1).find(":")
            start = m.start(1) + user_end + 1 if user_end >= 0 else m.start(1)
            if start < m.end(1):
                yield start, m.end(1)
    if "=" in text:
        for m in _QUERY_VALUE.finditer(text):
            if _SECRET_PARAM.search(m.group(1)):
                yield m.span(2)
        low = text.lower()
        if "pass" in low or "pwd" in low:  # a substring test first: the regex alone costs 30 times more
            for m in _DSN_PASSWORD.finditer(text):
                yield m.span(1)


def _has_escape(text: str) -> bool:
    """Whether a decoding pass could change `text` (substring tests first: they cost next to nothing)."""
    return ("\\" in text or "&" in text or "%" in text) and _ESCAPE.search(text) is not None


def redact(text: str) -> str:
    """The text with every registered secret, in every encoding above, replaced by `***`."""
    if not text:
        return text
    spans = list(_secret_spans(text))
    layers: list[_Layer] = []
    current = text
    for _ in range(_DECODE_PASSES):
        if not _has_escape(current):
            break
        layer = _Layer(current)
        if layer.text == current:
            break
        layers.append(layer)
        current = layer.text
        for a, b in _secret_spans(current):
            for lay in reversed(layers):  # map back through every pass to the original text
                a, b = lay.span(a)[0], lay.span(b - 1)[1]
            spans.append((a, b))
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for a, b in sorted(spans):
        if b <= pos:
            continue
        a = max(a, pos)
        out += [text[pos:a], MASK]
        pos = b
    out.append(text[pos:])
    return "".join(out)


_CLIP_MARGIN = 1 << 16  # characters past a cut that are redacted with the kept part, then dropped


def clip(text: str | bytes, limit: int) -> str:
    """Redact, then cut to `limit` characters (in that order, so a cut never exposes part of a secret).

    Bytes are decoded as UTF-8 (undecodable bytes replaced). Only the first `limit + _CLIP_MARGIN`
    characters are redacted, so a 32 MB body costs no more than a short one: a secret that starts
    before the cut is masked whole unless a separator run longer than the margin splits it.
    """
    head = text[: limit + _CLIP_MARGIN]
    shown = redact(head.decode("utf-8", "replace") if isinstance(head, bytes) else head)
    return shown if len(shown) <= limit else shown[:limit] + "..."


def public_url(url: str) -> str:
    """The URL without `user:pass@` and with secret-looking query values masked (what may be shown or written)."""
    try:
        parts = urllib.parse.urlsplit(url)
        has_user = parts.username is not None or parts.password is not None
        port = parts.port
    except ValueError:
        return redact(url)
    if has_user:
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if port is not None:
            netloc += f":{port}"
        parts = parts._replace(netloc=netloc)
    if parts.query:
        pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if any(_SECRET_PARAM.search(k) and v for k, v in pairs):
            masked = [(k, MASK if _SECRET_PARAM.search(k) and v else v) for k, v in pairs]
            parts = parts._replace(query=urllib.parse.urlencode(masked, safe="*"))
    return urllib.parse.urlunsplit(parts)


def has_userinfo(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.username is not None or parts.password is not None


def looks_secret(name: str, value: object) -> bool:
    """Whether a literal header (name, value) from a config looks like a credential."""
    return bool(_SECRET_HEADER.search(name)) or (isinstance(value, str) and bool(_SECRET_VALUE.search(value)))
