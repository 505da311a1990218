"""Loopback HTTP servers started by tests: reply with JSON, serve in a thread, always stop."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def send_json(handler: BaseHTTPRequestHandler, obj: Any, code: int = 200) -> None:
    """One JSON response with its length (keep-alive clients need it)."""
    send_body(handler, json.dumps(obj), code)


def send_body(handler: BaseHTTPRequestHandler, body: str, code: int = 200, kind: str = "application/json") -> None:
    """One response of any type with its length."""
    data = body.encode()
    handler.send_response(code)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextmanager
def serving_in_thread(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    """Serve on a daemon thread until the block ends; the server is shut down and closed either way."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
