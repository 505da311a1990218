"""`retbench services` and `local_services`: real servers on loopback, started and always stopped."""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from repo_paths import SCIFACT
from retbench.loopback import port_holders
from retbench.services import MARKER, local_services, needed
from retbench.services_state import state_path
from retbench.testing import LOOPBACK, free_port, listening_addresses
from stored import flat

RETBENCH = [sys.executable, "-m", "retbench.cli"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _config(tmp_path: Path, pg_host: str = "127.0.0.1") -> tuple[Path, int, int]:
    pg, milvus = free_port(), free_port()
    path = tmp_path / "stores.yaml"
    path.write_text(
        "name: s\noutput: out\ndatasets: [{name: scifact, split: test}]\nsystems:\n"
        f"  - {{name: pg, adapter: pgvector, params: {{dsn: 'postgresql://postgres@{pg_host}:{pg}/postgres', "
        "password_env: MY_PG_SECRET}}\n"
        f"  - {{name: mv, adapter: milvus, params: {{uri: 'http://127.0.0.1:{milvus}'}}}}\n"
        "  - {name: bm25, adapter: bm25s}\n"
    )
    return path, pg, milvus


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RETBENCH, *args], capture_output=True, text=True, env=env, timeout=300, check=False)


def test_services_up_starts_what_the_config_names_on_its_loopback_ports_and_down_stops_them(tmp_path):
    config, pg_port, milvus_port = _config(tmp_path)
    env = {**os.environ, "RETBENCH_CACHE": str(tmp_path / "cache")}
    env.pop("MY_PG_SECRET", None)
    up = _cli(["services", "up", str(config)], env)
    try:
        assert up.returncode == 0, up.stderr
        exports = dict(line.removeprefix("export ").split("=", 1) for line in up.stdout.splitlines())
        assert list(exports) == ["MY_PG_SECRET"] and len(exports["MY_PG_SECRET"]) >= 16
        status = _cli(["services", "status"], env)
        assert status.returncode == 0
        for port in (pg_port, milvus_port):
            assert listening_addresses(port) and listening_addresses(port) <= LOOPBACK
            assert f":{port}" in status.stdout
        assert status.stdout.count(" running ") == 2
        # the state file records where the servers are and what identifies them, never the secret
        saved = (tmp_path / "cache" / "services.json").read_text()
        assert exports["MY_PG_SECRET"] not in saved
        entries = json.loads(saved).values()
        folders = [Path(e["folder"]) for e in entries]
        assert all(json.loads((Path(e["folder"]) / MARKER).read_text())["token"] == e["token"] for e in entries)
        assert all(e["start_time"] > 0 and e["cmdline"] for e in entries)
        # a second `up` while they run is refused with one line
        again = _cli(["services", "up", str(config)], env)
        assert again.returncode == 2 and "already up" in again.stderr and "Traceback" not in again.stderr
        # the config's systems reach the servers with the exported secret
        import psycopg

        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{pg_port}/postgres", password=exports["MY_PG_SECRET"], connect_timeout=10
        ) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    finally:
        down = _cli(["services", "down"], env)
    assert down.returncode == 0 and down.stdout.count("stopped (process group") == 2, down.stdout + down.stderr
    assert not any(f.exists() for f in folders)
    assert not listening_addresses(pg_port) and not listening_addresses(milvus_port)
    assert _cli(["services", "status"], env).stdout.strip() == "no servers are up"


def test_services_up_refuses_an_address_off_this_machine(tmp_path):
    config, _, _ = _config(tmp_path, pg_host="db.example.org")
    env = {**os.environ, "RETBENCH_CACHE": str(tmp_path / "cache")}
    out = _cli(["services", "up", str(config)], env)
    assert out.returncode == 2 and out.stdout == ""
    assert "db.example.org" in out.stderr and "127.0.0.1 only" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "cache" / "services.json").exists()


def test_local_services_points_systems_at_fresh_servers_and_stops_them_when_the_run_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path))
    systems = [("milvus", {"uri": "http://10.1.2.3:19530", "index_type": "FLAT"}), ("bm25s", {})]
    assert [k.adapter for k, _ in needed(systems)] == ["milvus"]
    with pytest.raises(RuntimeError, match="the run failed"), local_services(systems, log=lambda m: None) as services:
        params = services.point("milvus", systems[0][1])
        server = services.servers["milvus"]
        assert params["uri"] == server.address and params["uri"].startswith("http://127.0.0.1:")
        assert params["index_type"] == "FLAT" and services.point("bm25s", {}) == {}
        assert listening_addresses(server.port) <= LOOPBACK
        raise RuntimeError("the run failed")
    assert server.proc.poll() is not None and not _alive(server.proc.pid)
    assert not server.folder.exists() and not state_path().exists()


def test_run_with_local_services_starts_points_and_stops_the_servers_its_systems_need(tmp_path):
    """`retbench run --services local`: a config naming a Typesense at a port where nothing listens runs
    against a fresh loopback Typesense with a generated key, which is gone when the run ends."""

    scifact = SCIFACT
    config = tmp_path / "ts.yaml"
    config.write_text(
        f"name: ts\noutput: {tmp_path / 'out'}\ndepth: 10\nmetrics: [ndcg@10]\n"
        f"datasets: [{{path: {scifact}, split: test, max_queries: 20, corpus_sample: 200}}]\n"
        "systems:\n"
        "  - {name: ts-keyword, adapter: typesense, params: {url: 'http://127.0.0.1:9', "
        "api_key_env: RETBENCH_TEST_TS_KEY, mode: keyword}}\n"
    )
    env = {**os.environ, "RETBENCH_CACHE": str(tmp_path / "cache")}
    env.pop("RETBENCH_TEST_TS_KEY", None)
    out = _cli(["run", str(config), "--services", "local", "--quiet", "--no-history"], env)
    assert out.returncode == 0, out.stdout + out.stderr
    metrics = flat(tmp_path / "out")
    assert metrics["ts-keyword"]["ndcg@10"] > 0.3
    started = [line for line in out.stdout.splitlines() if line.startswith("Typesense: http://127.0.0.1:")]
    assert len(started) == 1
    port = int(started[0].rsplit(":", 1)[1])
    assert not listening_addresses(port)
    # without --services the same config fails on the missing key before any work, naming the field
    bare = _cli(["run", str(config), "--quiet", "--no-history"], env)
    assert bare.returncode == 2 and "RETBENCH_TEST_TS_KEY" in bare.stderr and "Traceback" not in bare.stderr


def _pinned(pids: list[int]) -> list[int]:
    """pidfds for `pids`: a pidfd turns readable when its process exits, whoever reaps it."""
    return [os.pidfd_open(pid) for pid in pids]


def _all_exit(pidfds: list[int], timeout: float) -> bool:
    """Whether every pinned process exits within `timeout` s (one deadline for all)."""
    deadline = time.monotonic() + timeout
    try:
        for fd in pidfds:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(max(0, int((deadline - time.monotonic()) * 1000))):
                return False
        return True
    finally:
        for fd in pidfds:
            os.close(fd)


def _children(pid: int) -> set[int]:
    return {int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()}


def _lines(proc: subprocess.Popen) -> queue.Queue[str]:
    """A child's stdout, line by line, read by a thread (so the test waits on it with a deadline)."""
    out: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            out.put(line)
        out.put("")

    threading.Thread(target=pump, daemon=True).start()
    return out


def _wait_for(lines: queue.Queue[str], prefix: str, timeout: float = 240) -> str:
    seen = []
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line starting {prefix!r} within {timeout} s; saw {seen}") from None
        if not line or line.startswith(prefix):
            assert line, f"the process ended before printing {prefix!r}; it printed {seen}"
            return line.strip()
        seen.append(line)


PARENT = """
import json, sys
from retbench.services import local_services
systems = [("pgvector", {}), ("milvus", {}), ("typesense", {})]
with local_services(systems, log=lambda m: None) as s:
    print(json.dumps({a: [srv.proc.pid, srv.port, str(srv.folder)] for a, srv in s.servers.items()}), flush=True)
    sys.stdin.read()
"""


def test_servers_started_for_one_run_die_with_it_when_it_is_killed_by_sigkill(tmp_path):
    """`local_services` (what `run --services local` uses) in a parent that gets SIGKILL, so no `finally` runs:
    the kernel kills each server (PR_SET_PDEATHSIG), nothing is left listening, and the watchdog removes
    their data folders."""
    env = {**os.environ, "RETBENCH_CACHE": str(tmp_path)}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        started = json.loads(_wait_for(_lines(parent), "{"))
        assert sorted(started) == ["milvus", "pgvector", "typesense"]
        servers = {pid for pid, _, _ in started.values()}
        (watchdog,) = _children(parent.pid) - servers
        pidfds = _pinned([*servers, watchdog])
        assert parent.poll() is None and all(listening_addresses(port) for _, port, _ in started.values())
        assert all(Path(folder).is_dir() for _, _, folder in started.values())
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
    assert _all_exit(pidfds, timeout=120), "a server (or the watchdog) outlived the process that started it"
    assert not any(listening_addresses(port) for _, port, _ in started.values())
    assert not any(Path(folder).exists() for _, _, folder in started.values())


def test_run_with_local_services_killed_by_sigkill_leaves_no_server_running(tmp_path):
    """A real `retbench run --services local`, held mid-run by an HTTP system whose endpoint never answers,
    killed by SIGKILL: its Typesense goes with it, and so does Typesense's data folder."""
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        config = tmp_path / "ts.yaml"
        config.write_text(
            f"name: ts\noutput: {tmp_path / 'out'}\ndepth: 10\nmetrics: [ndcg@10]\n"
            f"datasets: [{{path: {SCIFACT}, split: test, max_queries: 5, corpus_sample: 100}}]\n"
            "systems:\n"
            "  - {name: ts, adapter: typesense, params: {url: 'http://127.0.0.1:9', mode: keyword}}\n"
            f"  - {{name: hang, adapter: http, params: {{url: 'http://127.0.0.1:{silent.getsockname()[1]}/s', "
            "timeout: 300, retries: 0}}\n"
        )
        env = {**os.environ, "RETBENCH_CACHE": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
        run = subprocess.Popen(
            [*RETBENCH, "run", str(config), "--services", "local", "--quiet", "--no-history"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        try:
            port = int(_wait_for(_lines(run), "Typesense: http://127.0.0.1:").rsplit(":", 1)[1])
            (server,) = [pid for pid, _ in port_holders(port)]
            argv = Path(f"/proc/{server}/cmdline").read_bytes().decode().split("\0")
            folder = Path(argv[argv.index("--data-dir") + 1]).parent
            pidfds = _pinned(sorted(_children(run.pid)))  # the server and the watchdog
            assert server in _children(run.pid) and len(pidfds) == 2 and folder.is_dir()
            assert run.poll() is None, "the run ended before it could be killed"
        finally:
            run.send_signal(signal.SIGKILL)
            run.wait(timeout=30)
    assert _all_exit(pidfds, timeout=120), "Typesense (or the watchdog) outlived the run that started it"
    assert not listening_addresses(port) and not folder.exists()
