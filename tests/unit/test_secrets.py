"""Redaction masks every spelling of a registered secret, whole, before any cut; nothing else changes."""

from __future__ import annotations

import base64
import io
import json

import pytest

from leak_support import PIECE, leaks, u_escaped
from retbench.secrets import MASK, clip, redact, register, register_dsn

KEY = "sk-Rb7Qz2X9wK4mT6vL8nPy3Hd5Jc1"  # 31 characters, as an OpenAI-style key
SECRETS = {"key": KEY}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture(autouse=True)
def _registered() -> None:
    register(KEY)


FORMS = {
    "verbatim": KEY,
    "\\u-escaped": u_escaped(KEY),
    "base64 of Bearer KEY (offset 1)": _b64(f"Bearer {KEY}"),
    "base64 of the whole header (offset 1)": _b64(f"Authorization: Bearer {KEY}"),
    "base64, offset 0": _b64(f"Authorization:Bearer {KEY}\r\n"),
    "base64, offset 2": _b64(f"Authorization:  Bearer {KEY}"),
    "base64url": base64.urlsafe_b64encode(f"Bearer {KEY}".encode()).decode(),
    "base64 wrapped at 20 columns": "\n".join(_b64(f"Bearer {KEY}")[i : i + 20] for i in range(0, 60, 20)),
    "hex": KEY.encode().hex(),
    "HEX": KEY.encode().hex().upper(),
    "split by a newline": f"{KEY[:14]}\n{KEY[14:]}",
    "split by CRLF and indentation": f"{KEY[:9]}\r\n    {KEY[9:]}",
    "split by a JSON \\n escape": f"{KEY[:14]}\\n{KEY[14:]}",
    "split by an escaped \\r\\n": f"{KEY[:14]}\\r\\n{KEY[14:]}",
    "split by a twice-escaped \\\\n": f"{KEY[:14]}\\\\n{KEY[14:]}",
    "a space between every character": " ".join(KEY),
    "JSON \\n inside a JSON reply": json.dumps({"content": json.dumps({"reason": f"{KEY[:14]}\n{KEY[14:]}"})}),
    "\\u-escaped and split": u_escaped(KEY[:10]) + "\\n" + u_escaped(KEY[10:]),
}


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_a_registered_key_is_masked_whole(form):
    text = f"the server said: {FORMS[form]} (end)"
    shown = redact(text)
    assert leaks({form: shown}, SECRETS) == []
    assert shown.startswith("the server said: ") and shown.endswith(" (end)") and MASK in shown


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("limit", [80, 200, 300])
def test_a_cut_at_any_offset_never_keeps_a_piece_of_the_key(form, limit):
    spelled = FORMS[form]
    for start in range(max(0, limit - len(spelled) - 2), limit + 2):
        shown = clip("." * start + spelled + " tail", limit)
        assert leaks({f"{form} at {start}": shown}, SECRETS) == []
        assert len(shown) <= limit + 3


def test_clip_takes_bytes_and_cuts_after_redacting():
    body = (b"." * 290) + KEY.encode() + b" more"
    shown = clip(body, 300)
    assert shown == "." * 290 + MASK + " more"
    assert clip(b"\xff" * 400, 10) == "\ufffd" * 10 + "..."


def test_an_auth_header_value_registers_its_credentials():
    register("Bearer tk-9Fq2Lm7Xc4Vb")
    register("Basic " + _b64("carol:Zp8-wQ3vN"))
    shown = redact("tk-9Fq2Lm7Xc4Vb; carol:Zp8-wQ3vN; Zp8-wQ3vN; " + _b64("carol:Zp8-wQ3vN"))
    assert shown == "***; ***; ***; ***"


def test_a_dsn_password_is_registered_and_the_dsn_shown_without_it():
    assert register_dsn("postgresql://postgres:Pg-s3cr3t-77@127.0.0.1:5432/db") == "postgresql://127.0.0.1:5432/db"
    assert register_dsn("host=db user=u password='Lq 9-x0z' dbname=x") == "host=db user=u password=*** dbname=x"
    assert redact("auth failed for Pg-s3cr3t-77 and Lq 9-x0z") == "auth failed for *** and ***"


def test_ordinary_text_is_left_as_it_is():
    ordinary = (
        "50% of 3 & 4 are <b>&amp; 100%; key=value; http://example.com/a?q=1&page=2\n"
        'a\\nb \\u0041 {"grade": 2, "reason": "sk-is a prefix"} '
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 c2stUmI3"
    )
    assert redact(ordinary) == ordinary


def test_a_console_table_masks_a_key_in_a_cell_however_it_wraps():
    from rich.console import Console
    from rich.text import Text

    from retbench.report.terminal import FittedTable

    error = Text(f"failed: HTTP 401: you sent {KEY} and {u_escaped(KEY)}", style="red")
    for width in (40, 60, 120):
        out = io.StringIO()
        Console(file=out, width=width).print(FittedTable(["system", "ndcg@10", "error"], [["svc", "0.5", error]]))
        assert leaks({f"width {width}": out.getvalue()}, SECRETS) == []
        assert "failed" in out.getvalue()


def test_the_piece_threshold_is_what_the_leak_check_uses():
    assert PIECE == 6 and leaks({"x": f"..{KEY[3:9]}.."}, SECRETS) and not leaks({"x": KEY[3:8]}, SECRETS)


def test_an_unexpected_exception_reaches_stderr_as_a_redacted_traceback(monkeypatch, capsys):
    import retbench.cli as cli

    def crash() -> None:
        raise RuntimeError(f"backend said {KEY[:12]}\n{KEY[12:]}")

    monkeypatch.setattr(cli, "app", crash)
    with pytest.raises(SystemExit) as info:
        cli.main()
    err = capsys.readouterr().err
    assert info.value.code == 1 and "Traceback" in err and "RuntimeError: backend said ***" in err
    assert leaks({"stderr": err}, SECRETS) == []
