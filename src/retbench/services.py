"""The servers a config's systems need, started on loopback for one run or until `retbench services down`.

Three system adapters talk to a server that retbench can start from registry packages (the same code the
tests use, `retbench.testing.servers`):

| adapter     | server                                   | address param | secret param   |
|-------------|------------------------------------------|---------------|----------------|
| `pgvector`  | PostgreSQL 16 + pgvector 0.8.5           | `dsn`         | `password_env` |
| `milvus`    | Milvus Lite (`milvus-lite server`)       | `uri`         | (none)         |
| `typesense` | Typesense 0.24.1                         | `url`         | `api_key_env`  |

Each server binds 127.0.0.1 on a free port with a fresh data folder and a generated password or key. The
secret is put in the environment variable the config's systems already name (`password_env`,
`api_key_env`; the adapter's default name when none does), so the config is used unchanged: `point()`
rewrites only the address parameter. Secrets never appear on a command line, in a results file or in the
state file `retbench services up` leaves behind (it holds pids, ports and folders; the secrets are printed
once as `export` lines for the shell that started them).

Only what was started is ever stopped or deleted. Each server gets a token (in its environment, and in a
marker file in its data folder); the state records it with the process' start time and command line.
`services down` signals a pid only while all of them still match (`loopback.ProcessIdentity`) and removes
a folder only if its marker holds the token; anything else is reported and left alone. Servers started for
one run (`run --services local`) are killed by the kernel if the run dies, even by SIGKILL. What `services up`
records, and how `status` and `down` read it back, is retbench.services_state.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.errors import InputError
from retbench.loopback import Ownership, port_taken, wait_exited
from retbench.secrets import register
from retbench.testing.servers import LocalServer, start_milvus, start_postgres, start_typesense


@dataclass(frozen=True)
class ServiceKind:
    """How one adapter's server is started and how a system is pointed at it."""

    adapter: str
    label: str
    address_param: str
    secret_param: str | None
    default_secret_env: str | None
    start: Callable[..., LocalServer]


KINDS: dict[str, ServiceKind] = {
    "pgvector": ServiceKind(
        "pgvector", "PostgreSQL + pgvector", "dsn", "password_env", "RETBENCH_PG_PASSWORD", start_postgres
    ),
    "milvus": ServiceKind("milvus", "Milvus Lite", "uri", None, None, start_milvus),
    "typesense": ServiceKind("typesense", "Typesense", "url", "api_key_env", "RETBENCH_TYPESENSE_KEY", start_typesense),
}


def _secret_env(kind: ServiceKind, systems: Iterable[tuple[str, Mapping[str, object]]]) -> str | None:
    """The environment variable the config's systems read the secret from (the first one named wins)."""
    if kind.secret_param is None:
        return None
    for adapter, params in systems:
        if adapter == kind.adapter and isinstance(params.get(kind.secret_param), str):
            return str(params[kind.secret_param])
    return kind.default_secret_env


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: the file `start` writes in each server's data folder; `services down` removes only folders holding it
MARKER = ".retbench-service.json"


def configured_port(kind: ServiceKind, systems: Iterable[tuple[str, Mapping[str, object]]], source: str) -> int | None:
    """The loopback port the config's systems expect this server on (None when they name no address).

    `services up` starts the server there so the config works unchanged; an address off this machine is
    refused, since retbench starts servers on loopback only.
    """
    from urllib.parse import urlsplit

    for adapter, params in systems:
        address = params.get(kind.address_param) if adapter == kind.adapter else None
        if not isinstance(address, str):
            continue
        parts = urlsplit(address)
        if parts.hostname not in LOOPBACK_HOSTS:
            raise InputError(
                f"{kind.adapter} points at {parts.hostname!r}: retbench starts servers on 127.0.0.1 only "
                f"(use `retbench run --services local`, which points the systems at the servers it starts)",
                path=source,
                field=kind.address_param,
            )
        return parts.port
    return None


def needed(systems: Iterable[tuple[str, Mapping[str, object]]]) -> list[tuple[ServiceKind, str | None]]:
    """(kind, secret variable) of each server these (adapter, params) systems need, in a stable order."""
    pairs = list(systems)
    adapters = {adapter for adapter, _ in pairs}
    return [(KINDS[a], _secret_env(KINDS[a], pairs)) for a in sorted(adapters & set(KINDS))]


@dataclass
class Services:
    """Running servers by adapter, and how to point systems at them."""

    servers: dict[str, LocalServer]
    secret_envs: dict[str, str | None]
    tokens: dict[str, str] = field(default_factory=dict)  # what each server holds (environment, folder marker)

    def point(self, adapter: str, params: Mapping[str, object]) -> dict[str, object]:
        """A system's params with its address (and secret variable) set to the local server's."""
        server = self.servers.get(adapter)
        if server is None:
            return dict(params)
        kind = KINDS[adapter]
        out = {**params, kind.address_param: server.address}
        env = self.secret_envs.get(adapter)
        if kind.secret_param and env:
            out[kind.secret_param] = env
        return out

    def exports(self) -> list[str]:
        """`export NAME=value` lines for the secrets (for a shell that will run retbench against them)."""
        return [f"export {name}={value}" for s in self.servers.values() for name, value in sorted(s.env.items())]

    def describe(self) -> list[str]:
        return [f"{KINDS[a].label}: {s.address} (pid {s.proc.pid})" for a, s in self.servers.items()]

    def stop(self) -> None:
        for server in self.servers.values():
            with contextlib.suppress(Exception):
                server.stop()


def start(
    systems: Iterable[tuple[str, Mapping[str, object]]],
    *,
    detached: bool = False,
    ports: Mapping[str, int | None] | None = None,
    log: Callable[[str], None] = print,
    watchdog: Watchdog | None = None,
) -> Services:
    """Start every server these systems need; on any failure, stop the ones already started and raise.

    `ports`: the port for an adapter's server (a free one when absent or None). `detached`: the servers
    outlive this process (`services up`); otherwise they are tied to it (the kernel kills them when it dies).
    `watchdog`: told each server as it starts, so it removes their folders if this process is killed.
    """
    plan = needed(systems)
    services = Services({}, {})
    tethered = not detached and _main_thread()
    if not detached and not tethered:
        log("not the main thread: the servers are stopped when this block ends, but not if the process is killed")
    try:
        for kind, env in plan:
            log(f"starting {kind.label} on 127.0.0.1 ...")
            token = secrets.token_hex(16)
            kwargs: dict[str, Any] = {"detached": detached, "port": (ports or {}).get(kind.adapter)}
            kwargs["owner"] = Ownership(token, tethered)
            if kind.secret_param and env:
                kwargs["password_env" if kind.adapter == "pgvector" else "api_key_env"] = env
            server = kind.start(**kwargs)
            for value in server.env.values():
                register(value)
            services.servers[kind.adapter] = server
            services.secret_envs[kind.adapter] = env
            services.tokens[kind.adapter] = token
            mark_folder(server.folder, kind.adapter, token)
            if watchdog is not None:
                watchdog.watch(server.proc.pid, token, server.folder)
            log(f"{kind.label}: {server.address}")
    except BaseException:
        services.stop()
        raise
    return services


def mark_folder(folder: Path, adapter: str, token: str) -> None:
    """Write the marker that lets `services down` remove this folder (and nothing without it)."""
    (folder / MARKER).write_text(json.dumps({"adapter": adapter, "token": token}) + "\n", encoding="utf-8")


@contextlib.contextmanager
def local_services(
    systems: Iterable[tuple[str, Mapping[str, object]]], log: Callable[[str], None] = print
) -> Iterator[Services]:
    """Servers for the length of a `with` block, stopped on the way out: on success, failure, Ctrl-C or SIGTERM.

    If this process is killed outright (SIGKILL, the OOM killer) no `finally` runs: the kernel kills the
    servers (they are tethered) and a watchdog process then removes their data folders.
    """
    previous = signal.getsignal(signal.SIGTERM)

    def terminated(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    in_main = _main_thread()
    if in_main:
        signal.signal(signal.SIGTERM, terminated)
    watchdog = Watchdog()
    try:
        services = start(systems, log=log, watchdog=watchdog)
        try:
            yield services
        finally:
            services.stop()
    finally:
        watchdog.close()
        if in_main:
            signal.signal(signal.SIGTERM, previous)


class Watchdog:
    """A process that outlives this one to remove the data folders of servers that died with it.

    It reads `[pid, token, folder]` lines on a pipe; the pipe's end (this process closed it or died) is its
    cue: it waits up to `timeout` s for each pid to exit and removes the folder if its marker holds the token
    (a server still running keeps its folder). It never signals anything.
    """

    def __init__(self, timeout: float = 60) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # this very retbench
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "retbench.services", str(timeout)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,  # never holds this process' output open
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self.timeout = timeout

    def watch(self, pid: int, token: str, folder: Path) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps([pid, token, str(folder)]) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """End of watch: the servers were stopped, so it finds nothing left to do and exits."""
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=self.timeout)


def _watch(lines: Iterable[str], timeout: float) -> None:
    """The watchdog's side (`python -m retbench.services TIMEOUT`): pin each pid as it is told, then clean up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the whole group; the run handles it
    watched: list[tuple[int | None, int, str, Path]] = []
    for line in lines:
        try:
            pid, token, folder = json.loads(line)
        except ValueError:  # a line cut short by its writer's death: that server's folder stays
            continue
        try:
            watched.append((os.pidfd_open(pid), pid, token, Path(folder)))
        except ProcessLookupError:
            watched.append((None, pid, token, Path(folder)))
    deadline = time.monotonic() + timeout
    for pidfd, pid, token, folder in watched:
        if pidfd is None or wait_exited(pidfd, pid, max(0.0, deadline - time.monotonic())):
            remove_folder(folder, token)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def remove_folder(folder: Path, token: str) -> str | None:
    """Remove a server's data folder (and its log beside it) if the marker in it holds `token`; else why not.

    The one folder rule for the watchdog (a run's servers) and `services down` (services_state.stop_recorded)."""
    if not folder.name or not folder.is_absolute():
        return "not an absolute path"
    if not folder.exists() and not folder.is_symlink():
        return None
    if folder.is_symlink() or not folder.is_dir():
        return "not a folder (a link or a file)"
    marker = folder / MARKER
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else None
    except (OSError, ValueError):
        recorded = None
    if not isinstance(recorded, dict):
        return f"it holds no marker ({MARKER}) written by `services up`"
    if recorded.get("token") != token:
        return f"its marker ({MARKER}) holds another token"
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        folder.with_name(folder.name + ".log").unlink()
    return None


def require_free_ports(ports: Mapping[str, int | None], source: str) -> None:
    """Refuse, before anything starts, ports the config names that are taken (by whom, when that can be told)."""
    problems = []
    seen: dict[int, str] = {}
    for adapter, port in ports.items():
        if port is None:
            continue
        if port in seen:
            problems.append(f"port {port} is named for both {KINDS[seen[port]].label} and {KINDS[adapter].label}")
            continue
        seen[port] = adapter
        taken = port_taken(port)
        if taken:
            problems.append(f"{KINDS[adapter].label} cannot start: {taken}")
    if problems:
        raise InputError("; ".join(problems) + " (free the port or name another in the config)", path=source)


if __name__ == "__main__":
    _watch(sys.stdin, float(sys.argv[1]))
