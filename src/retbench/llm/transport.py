"""One HTTP request to a model server, bounded as a whole: the transport under `llm.client.ChatClient`.

A socket's read timeout restarts on every byte, so a server that trickles its answer or sends keep-alives
forever would hold a call past any timeout; here a timer shuts the connection's sockets at the deadline
instead, which wakes a blocked read at once. Standard library only (urllib), so judging adds no dependency.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import threading
import urllib.error
import urllib.request

from retbench.secrets import clip

RETRYABLE_HTTP = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_BODY = 32 * 1024 * 1024  # bytes; a chat answer is bounded by max_tokens, far below this
ERROR_CHARS = 300  # characters of a server's error text kept in a call log (after redaction: `secrets.clip`)
ERROR_READ = 1 << 16  # bytes of an error body read, far more than kept, so a secret near the cut is read whole
_DONE = re.compile(rb"data:[ \t]*\[DONE\]")


class CallFailed(Exception):
    """One attempt that failed, with a reason a person can act on; `retry`: another attempt may help."""

    def __init__(self, message: str, *, retry: bool = False, timeout: bool = False) -> None:
        super().__init__(message)
        self.retry, self.timeout = retry, timeout


def fetch(req: urllib.request.Request, timeout: float, stop_at_done: bool = False) -> tuple[str, bytes]:
    """(Content-Type, body) of one request, all of it within `timeout` seconds, or CallFailed.

    A timer shuts the connection's socket at the deadline, so a blocked read returns at once however
    slowly the server sends (module docstring). `stop_at_done`: an event stream is read up to its
    `data: [DONE]` line (a server may keep the connection open after its last event).
    """
    watch = _Watch()
    opener = urllib.request.build_opener(_WatchedHTTP(watch), _WatchedHTTPS(watch))
    timer = threading.Timer(timeout, watch.expire)
    timer.daemon = True
    timer.start()
    try:
        try:
            with opener.open(req, timeout=timeout) as resp:
                kind = resp.headers.get("Content-Type", "") or ""
                chunks, size, line = [], 0, b""
                sse = stop_at_done and "text/event-stream" in kind
                while True:
                    chunk = resp.read1(65536)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > MAX_BODY:
                        raise CallFailed(f"the answer is larger than {MAX_BODY} bytes: refused")
                    chunks.append(chunk)
                    if sse:  # whole lines only: "data: [DONE]" inside an event's text is not the end
                        *complete, line = (line + chunk).split(b"\n")
                        if any(_DONE.fullmatch(c.strip()) for c in complete):
                            break
                missing = resp.length if not sse else None
        except urllib.error.HTTPError as exc:
            detail = clip(exc.read(ERROR_READ) if exc.fp else b"", ERROR_CHARS).strip()  # redacted, then cut
            raise CallFailed(f"HTTP {exc.code}: {detail}".strip(), retry=exc.code in RETRYABLE_HTTP) from None
        if watch.expired:
            raise TimeoutError
        if missing:
            raise CallFailed(f"the answer was cut: {missing} bytes of its Content-Length never came", retry=True)
        return kind, b"".join(chunks)
    except ValueError as exc:  # urllib's word for a URL it cannot request
        raise CallFailed(f"cannot request this URL: {exc}") from None
    except CallFailed:
        if watch.expired:
            raise CallFailed(_late(timeout), retry=True, timeout=True) from None
        raise
    except (OSError, http.client.HTTPException) as exc:
        if watch.expired or isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError):
            raise CallFailed(_late(timeout), retry=True, timeout=True) from None
        reason = getattr(exc, "reason", None) or exc
        raise CallFailed(f"{type(reason).__name__}: {reason}", retry=True) from None
    finally:
        timer.cancel()


def _late(timeout: float) -> str:
    return f"timed out: no complete answer within {timeout:g} s (the deadline covers the whole call)"


class _Watch:
    """The sockets of one call; `expire()` (the deadline timer) shuts them, waking any blocked read."""

    def __init__(self) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed: nothing left to wake
        sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type[http.client.HTTPConnection], watch: _Watch) -> type[http.client.HTTPConnection]:
    """`base` whose socket, once connected, is handed to `watch` (urllib forgets it once the headers came)."""

    class Watched(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            watch.track(self.sock)

    return Watched


class _WatchedHTTP(urllib.request.HTTPHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self._conn = _watched(http.client.HTTPConnection, watch)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._conn, req)


class _WatchedHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self._conn = _watched(http.client.HTTPSConnection, watch)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._conn, req)  # no context: the default one, as urlopen's
