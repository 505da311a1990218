"""Loopback servers: a free port, who listens on it, and starting, recognising and stopping a server process.

retbench starts servers only on 127.0.0.1 (the tests' stores, the LLM judge's tinyq4, `retbench services`)
and checks, from /proc/net/tcp and tcp6, that nothing listens on any other address before it uses one.

A pid alone does not name a process: once a server exits, the kernel gives its pid to the next process
that starts. `ProcessIdentity` records what does (the boot, the start time in /proc/PID/stat, the command
line and a token put in the server's environment), so a server is signalled only while it is provably the
one that was started (`stop_verified`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}

#: the environment variable a started server holds its token in (read back from /proc/PID/environ)
TOKEN_ENV = "RETBENCH_SERVICE_TOKEN"
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tcp_sockets(port: int) -> Iterator[tuple[str, bool, int]]:
    """(local address, listening, inode) of every TCP socket bound to `port` (/proc/net/tcp and tcp6)."""
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                addr, hexport = cols[1].split(":")
                if int(hexport, 16) != port:
                    continue
                raw = bytes.fromhex(addr)
                if v6:  # four little-endian 32-bit words
                    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    address = socket.inet_ntop(socket.AF_INET6, raw)
                else:
                    address = socket.inet_ntop(socket.AF_INET, raw[::-1])
                yield address, cols[3] == "0A", int(cols[9])  # 0A: LISTEN


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on `port` (from /proc/net/tcp and tcp6)."""
    return {address for address, listening, _ in _tcp_sockets(port) if listening}


def port_holders(port: int) -> list[tuple[int, str]]:
    """(pid, command name) of each process holding a socket that listens on `port`, among those this user may
    inspect (/proc/PID/fd: the socket's inode)."""
    inodes = {f"socket:[{inode}]" for _, listening, inode in _tcp_sockets(port) if listening and inode}
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or not inodes:
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                found.append((int(proc.name), (proc / "comm").read_text(errors="replace").strip()))
    return found


def port_taken(port: int) -> str | None:
    """Why 127.0.0.1:`port` cannot be bound (who listens on it, when that can be told), or None when it can."""
    listeners = sorted(listening_addresses(port))
    if not listeners:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no obstacle
            try:
                s.bind(("127.0.0.1", port))
                return None
            except OSError as exc:
                return f"port {port} is taken ({exc.strerror})"
    holders = port_holders(port)
    by = f" by {', '.join(f'pid {pid} ({name})' for pid, name in holders)}" if holders else ""
    return f"port {port} is taken: something listens on {', '.join(listeners)}{by}"


def stop_process(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds; waits for the exit either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


@dataclass(frozen=True)
class Ownership:
    """What a server is started with so its owner can tell it apart later, and whether it dies with its owner."""

    token: str  # put in the server's environment as RETBENCH_SERVICE_TOKEN
    tethered: bool = False  # the kernel kills it when the starting process dies (see `die_with_parent`)


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn` that has the kernel SIGKILL the child when this process dies, even by SIGKILL.

    prctl(PR_SET_PDEATHSIG) fires when the *thread* that forked exits, so call this from a thread that
    lives as long as the servers (the main thread). libc is resolved here, before the fork, so the child
    only calls a function pointer; if this process died before the child set the signal, the child kills
    itself (its parent is then no longer this pid).
    """
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    args = [ctypes.c_ulong(signal.SIGKILL), *(ctypes.c_ulong(0) for _ in range(3))]  # prctl reads unsigned longs
    parent = os.getpid()

    def preexec() -> None:
        if prctl(_PR_SET_PDEATHSIG, *args) != 0 or os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


# -- what identifies a process beyond its pid ----------------------------------------------------
def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def boot_id() -> str:
    """This boot's id: a start time (ticks since boot) means nothing across a restart."""
    return (_read("/proc/sys/kernel/random/boot_id") or b"").decode().strip()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) from /proc/PID/stat (fields 3 and 22; read after the last ')' of the name)."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    return fields[0].decode(), int(fields[19])


def _cmdline(pid: int) -> tuple[str, ...]:
    raw = _read(f"/proc/{pid}/cmdline") or b""
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0")[:-1])


#: "replaced": the pid now names a later process (so the recorded one exited); "other": the same start time
#: but another command line or token, which cannot be explained, so nothing about it is assumed
Verdict = Literal["ours", "exited", "replaced", "other"]


@dataclass(frozen=True)
class ProcessIdentity:
    """A started process as it was recorded: pid, boot, start time, command line and its token."""

    pid: int
    boot_id: str
    start_time: int
    cmdline: tuple[str, ...]
    token: str

    @classmethod
    def read(cls, pid: int, token: str) -> ProcessIdentity:
        """The identity of the running process `pid`, which was started holding `token`."""
        stat = _stat(pid)
        if stat is None:
            raise ProcessLookupError(f"no process has pid {pid}")
        return cls(pid, boot_id(), stat[1], _cmdline(pid), token)

    def check(self) -> tuple[Verdict, str]:
        """Whether `pid` is still this process ("ours"), has exited, or is another one; and which check said so.

        The checks, in order: a process has the pid, the boot is the same, the start time is the same, the
        command line is the same, and the process holds the token (when its environment is readable).
        """
        stat = _stat(self.pid)
        if stat is None:
            return "exited", f"no process has pid {self.pid}"
        if boot_id() != self.boot_id:
            return "replaced", f"pid {self.pid} is another process: the machine has restarted since (boot id differs)"
        state, started = stat
        if started != self.start_time:
            return (
                "replaced",
                f"pid {self.pid} is another process: its start time differs ({started}, not {self.start_time})",
            )
        if state in ("Z", "X"):
            return "exited", f"pid {self.pid} has exited"
        if _cmdline(self.pid) != self.cmdline:
            return "other", f"pid {self.pid} is another process: its command line differs"
        try:
            environ = _read(f"/proc/{self.pid}/environ") or b""
        except PermissionError:  # another user's process: start time and command line have to do
            return "ours", f"pid {self.pid}: start time and command line match"
        if f"{TOKEN_ENV}={self.token}".encode() not in environ.split(b"\0"):
            return "other", f"pid {self.pid} is another process: it does not hold the token it was started with"
        return "ours", f"pid {self.pid}: start time, command line and token match"


Outcome = Literal["stopped", "exited", "replaced", "other", "still running"]


def stop_verified(identity: ProcessIdentity, timeout: float = 30) -> tuple[Outcome, str]:
    """Stop the process `identity` records, and its process group when it leads one; nothing else, ever.

    The pid is pinned first (a pidfd), then checked, so it cannot pass to another process between the
    check and the signal. SIGTERM; SIGKILL if it still runs after `timeout` s. Returns what happened
    ("replaced", "other": the pid is not the recorded process, nothing was signalled) and a line saying why.
    """
    try:
        pidfd = os.pidfd_open(identity.pid)
    except ProcessLookupError:
        return "exited", f"no process has pid {identity.pid}"
    try:
        verdict, why = identity.check()
        if verdict != "ours":
            return verdict, why
        try:
            leads_group = os.getpgid(identity.pid) == identity.pid
        except ProcessLookupError:
            return "exited", f"pid {identity.pid} has exited"
        what = f"{'process group' if leads_group else 'process'} {identity.pid}"
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, sig)
                if leads_group:
                    os.killpg(identity.pid, sig)
            if wait_exited(pidfd, identity.pid, timeout):
                return "stopped", f"stopped ({what}; {why})"
        return "still running", f"{what} still runs after SIGKILL"
    finally:
        os.close(pidfd)


def wait_exited(pidfd: int, pid: int, timeout: float) -> bool:
    """Wait up to `timeout` s for a pinned process to exit (its pidfd turns readable); reap it if it is our child."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    if not poller.poll(int(timeout * 1000)):
        return False
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    return True
