"""Versioned prompt templates: `<name>_v<version>.txt` beside this file.

A template's text before a line `=== user ===` is the system message, the rest the user message;
`${field}` placeholders are filled with `string.Template` (so JSON braces need no escaping). A
template is never edited once results depend on it: a change is a new version, and the version and
the text's sha256 go into every manifest and cache key.

Untrusted text (a judged passage, a system's answer) is quoted where a template says so: a line
`=== quote: passage query ===` names the fields that are data, each of which the template wraps in a
tag of its own name (`<passage>${passage}</passage>`). In every quoted field's value, each `<` that
opens or closes one of those tags (`<passage`, `</ passage`, any case) is written `&lt;`, so no value
can close its block, or open another, and speak outside it (`quote`). The line itself is not sent.
Templates without the line (the first versions) fill their fields verbatim, exactly as before.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from pathlib import Path

from retbench.errors import ConfigError

HERE = Path(__file__).parent
SPLIT = "=== user ==="
QUOTE_LINE = re.compile(r"^=== quote: ([a-z0-9_ ]+) ===[ \t]*\n?", re.M)


def quote(text: str, tags: tuple[str, ...]) -> str:
    """`text` with every `<` that would open or close one of `tags` written `&lt;` (module docstring)."""
    if not tags:
        return text
    names = "|".join(re.escape(t) for t in tags)
    return re.sub(rf"<(?=\s*/?\s*(?:{names})(?![a-z0-9_]))", "&lt;", text, flags=re.I)


@dataclass(frozen=True)
class Prompt:
    """A loaded template: `name` (e.g. relevance), `version` (e.g. 1), the text and its sha256."""

    name: str
    version: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.name}_v{self.version}"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def quoted(self) -> tuple[str, ...]:
        """The fields this template declares as untrusted data (its `=== quote: ... ===` line)."""
        return tuple(name for m in QUOTE_LINE.finditer(self.text) for name in m[1].split())

    def messages(self, **fields: str) -> list[dict[str, str]]:
        """Chat messages with the placeholders filled (quoted fields quoted); a missing field is an error naming it."""
        tags = self.quoted
        text = QUOTE_LINE.sub("", self.text) if tags else self.text
        fields = {k: quote(v, tags) if k in tags else v for k, v in fields.items()}
        system, _, user = text.partition(SPLIT) if SPLIT in text else ("", "", text)
        try:
            filled = [string.Template(part.strip()).substitute(fields) for part in (system, user)]
        except KeyError as exc:
            raise ConfigError(f"prompt {self.id} needs the field {exc.args[0]!r}", field="prompt") from None
        out = [{"role": "system", "content": filled[0]}] if filled[0] else []
        return [*out, {"role": "user", "content": filled[1]}]

    def describe(self) -> dict[str, str | int]:
        return {"name": self.name, "version": self.version, "id": self.id, "sha256": self.sha256}


def available() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*_v*.txt"))


def load_prompt(prompt_id: str | Path) -> Prompt:
    """`relevance_v1` -> the shipped Prompt; a path to your own `<name>_v<N>.txt` works the same way.

    An unknown id lists the shipped ones; a file whose name has no `_v<N>` version is refused.
    """
    given = Path(prompt_id)
    path = given if given.suffix == ".txt" else HERE / f"{prompt_id}.txt"
    m = re.fullmatch(r"([a-z][a-z0-9_]*)_v(\d+)", path.stem)
    if not m or not path.is_file():
        raise ConfigError(
            f"unknown prompt {str(prompt_id)!r}; shipped: {', '.join(available())} (or a file named <name>_v<N>.txt)",
            field="prompt",
        )
    return Prompt(m[1], int(m[2]), path.read_text(encoding="utf-8"))
