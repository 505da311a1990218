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
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retbench.errors import InputError
from retbench.llm.local import cache_root
from retbench.loopback import listening_addresses
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


def _secret_env(kind: ServiceKind, systems: Iterable[tuple[str, Mapping[str, Any]]]) -> str | None:
    """The environment variable the config's systems read the secret from (the first one named wins)."""
    if kind.secret_param is None:
        return None
    for adapter, params in systems:
        if adapter == kind.adapter and isinstance(params.get(kind.secret_param), str):
            return str(params[kind.secret_param])
    return kind.default_secret_env


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def configured_port(kind: ServiceKind, systems: Iterable[tuple[str, Mapping[str, Any]]], source: str) -> int | None:
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


def needed(systems: Iterable[tuple[str, Mapping[str, Any]]]) -> list[tuple[ServiceKind, str | None]]:
    """(kind, secret variable) of each server these (adapter, params) systems need, in a stable order."""
    pairs = list(systems)
    adapters = {adapter for adapter, _ in pairs}
    return [(KINDS[a], _secret_env(KINDS[a], pairs)) for a in sorted(adapters & set(KINDS))]


@dataclass
class Services:
    """Running servers by adapter, and how to point systems at them."""

    servers: dict[str, LocalServer]
    secret_envs: dict[str, str | None]

    def point(self, adapter: str, params: Mapping[str, Any]) -> dict[str, Any]:
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
    systems: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    detached: bool = False,
    ports: Mapping[str, int | None] | None = None,
    log: Callable[[str], None] = print,
) -> Services:
    """Start every server these systems need; on any failure, stop the ones already started and raise.

    `ports`: the port for an adapter's server (a free one when absent or None).
    """
    plan = needed(systems)
    services = Services({}, {})
    try:
        for kind, env in plan:
            log(f"starting {kind.label} on 127.0.0.1 ...")
            kwargs: dict[str, Any] = {"detached": detached, "port": (ports or {}).get(kind.adapter)}
            if kind.secret_param and env:
                kwargs["password_env" if kind.adapter == "pgvector" else "api_key_env"] = env
            server = kind.start(**kwargs)
            for value in server.env.values():
                register(value)
            services.servers[kind.adapter] = server
            services.secret_envs[kind.adapter] = env
            log(f"{kind.label}: {server.address}")
    except BaseException:
        services.stop()
        raise
    return services


@contextlib.contextmanager
def local_services(
    systems: Iterable[tuple[str, Mapping[str, Any]]], log: Callable[[str], None] = print
) -> Iterator[Services]:
    """Servers for the length of a `with` block, stopped on the way out: on success, failure, Ctrl-C or SIGTERM."""
    previous = signal.getsignal(signal.SIGTERM)

    def terminated(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    in_main = _main_thread()
    if in_main:
        signal.signal(signal.SIGTERM, terminated)
    services = start(systems, log=log)
    try:
        yield services
    finally:
        services.stop()
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# -- servers that outlive one command: `retbench services up|down|status` ------------------------------
def state_path() -> Path:
    """Where `services up` records what it started: $RETBENCH_CACHE/services.json, else .retbench-cache/."""
    return cache_root() / "services.json"


def save_state(services: Services, path: Path) -> None:
    """Pids, ports, addresses and folders of detached servers (never their secrets)."""
    state = {
        adapter: {
            "label": KINDS[adapter].label,
            "pid": s.proc.pid,
            "port": s.port,
            "address": s.address,
            "folder": str(s.folder),
            "secret_env": services.secret_envs.get(adapter),
        }
        for adapter, s in services.servers.items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def load_state(path: Path) -> dict[str, dict[str, Any]]:
    """What `services up` recorded; {} when nothing is up."""
    if not path.is_file():
        return {}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not a services state file: {exc}", path=path) from None
    if not isinstance(state, dict) or not all(isinstance(v, dict) and "pid" in v for v in state.values()):
        raise InputError("not a services state file (expected {adapter: {pid, port, ...}})", path=path)
    return state


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status(path: Path) -> list[dict[str, Any]]:
    """Each recorded server with whether its process lives and whether its port listens on loopback only."""
    rows = []
    for adapter, entry in load_state(path).items():
        alive = _alive(int(entry["pid"]))
        bound = listening_addresses(int(entry["port"])) if alive else set()
        rows.append({"adapter": adapter, **entry, "running": alive, "bound": sorted(bound)})
    return rows


def stop_recorded(path: Path, timeout: float = 30) -> list[str]:
    """Stop every server `services up` started (SIGTERM, then SIGKILL after `timeout`), remove its folder."""
    import shutil

    stopped = []
    for adapter, entry in load_state(path).items():
        pid = int(entry["pid"])
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)  # detached servers lead their own session
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                _reap(pid)
                time.sleep(0.1)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                _reap(pid)
        folder = Path(entry["folder"])
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            folder.with_name(folder.name + ".log").unlink()
        stopped.append(f"{entry.get('label', adapter)}: stopped (pid {pid})")
    path.unlink(missing_ok=True)
    return stopped


def _reap(pid: int) -> None:
    """Collect a child that has exited (a server started by this very process is a zombie until waited)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def require_none_running(path: Path) -> None:
    running = [r for r in status(path) if r["running"]]
    if running:
        names = ", ".join(f"{r['label']} (pid {r['pid']})" for r in running)
        raise InputError(f"servers are already up: {names}; run `retbench services down` first", path=path)
