"""Loopback servers: a free port, who listens on it, and stopping a server process.

retbench starts servers only on 127.0.0.1 (the tests' stores, the LLM judge's tinyq4, `retbench services`)
and checks, from /proc/net/tcp and tcp6, that nothing listens on any other address before it uses one.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on `port` (from /proc/net/tcp and tcp6)."""
    found: set[str] = set()
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                addr, hexport = cols[1].split(":")
                if cols[3] != "0A" or int(hexport, 16) != port:  # 0A: LISTEN
                    continue
                raw = bytes.fromhex(addr)
                if v6:  # four little-endian 32-bit words
                    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    found.add(socket.inet_ntop(socket.AF_INET6, raw))
                else:
                    found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
    return found


def stop_process(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds; waits for the exit either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
