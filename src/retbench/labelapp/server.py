"""Serving the labelling page with uvicorn: loopback unless told otherwise, the URL printed once listening."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import uvicorn

from retbench.errors import InputError
from retbench.labelapp.app import LOOPBACK_HOSTS, create_app
from retbench.loopback import LOOPBACK


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free one). SO_REUSEADDR, so a restarted server gets its
    port back at once, as uvicorn does for the sockets it makes itself."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror})", field="--port") from None
    sock.listen(128)
    return sock


def serve(study_dir: str | Path, *, host: str = "127.0.0.1", port: int = 8765, labeller: str | None = None) -> None:
    """Serve the page over `study_dir` until interrupted. Off loopback any Host header is accepted (the
    person chose to expose it); the same-origin rule for POSTs still holds."""
    hosts = LOOPBACK_HOSTS if host in LOOPBACK else ["*"]
    app = create_app(study_dir, labeller=labeller, hosts=hosts)
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"labelling page for {study_dir} at http://{shown}:{sock.getsockname()[1]}/", flush=True)
    if host not in LOOPBACK:
        print(f"note: listening on {host}, not loopback: anyone who can reach it can label", file=sys.stderr)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])
