"""`retbench services down|status` touch only what `services up` started: real processes, real folders.

A stale state file (the server exited long ago, its pid now another process, its folder path now the user's)
must leave that process running and those files in place, exit 2 and name the check that failed. The
processes here are `sleep`s this test starts; the "server" of the happy path is one started the way `up`
starts servers (its token in its environment, a marker in its folder), recorded by `save_state`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from retbench.loopback import TOKEN_ENV
from retbench.services import MARKER, Services, mark_folder
from retbench.services_state import save_state
from retbench.testing import free_port
from retbench.testing.servers import LocalServer

RETBENCH = [sys.executable, "-m", "retbench.cli"]


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie child of this test counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except FileNotFoundError:
        return False


def _cli(args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RETBENCH_CACHE": str(cache)}
    return subprocess.run([*RETBENCH, *args], capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.fixture
def sleeper():
    """Start `sleep 300` (own session or this test's group, with or without a token); always end it."""
    started: list[subprocess.Popen] = []

    def start(*, own_group: bool, token: str | None = None) -> subprocess.Popen:
        env = {**os.environ, TOKEN_ENV: token} if token else None
        proc = subprocess.Popen(["sleep", "300"], start_new_session=own_group, env=env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait(timeout=30)


def _user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my-notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "thesis.txt").write_text("four years of work\n")
    (folder / "sub" / "data.csv").write_text("a,b\n1,2\n")
    return folder


def _record(cache: Path, proc: subprocess.Popen, folder: Path, token: str) -> dict:
    """The state `services up` writes for a server whose process is `proc` and whose folder is `folder`."""
    server = LocalServer("Typesense", proc, free_port(), folder, "http://127.0.0.1:9", {})
    save_state(Services({"typesense": server}, {"typesense": None}, {"typesense": token}), cache / "services.json")
    return json.loads((cache / "services.json").read_text())


@pytest.mark.parametrize(
    ("tamper", "check"),
    [
        (lambda e: e.update(start_time=e["start_time"] - 1), "its start time differs"),
        (lambda e: e.update(boot_id="another-boot"), "boot id differs"),
        (lambda e: e.update(cmdline=["typesense-server", "--api-port", "8108"]), "its command line differs"),
        (lambda e: e.update(token="not-the-token-it-holds"), "does not hold the token"),
    ],
    ids=["start-time", "boot", "command-line", "token"],
)
@pytest.mark.parametrize("own_group", [True, False], ids=["group-leader", "not-group-leader"])
def test_down_with_a_stale_state_leaves_an_unrelated_process_and_the_users_folder_alone(
    tmp_path, sleeper, own_group, tamper, check
):
    """Each check alone is enough: with every other field matching, one that differs stops any signal."""
    cache, folder = tmp_path / "cache", _user_folder(tmp_path)
    token = "a" * 32
    proc = sleeper(own_group=own_group, token=token)
    state = _record(cache, proc, folder, token)
    tamper(state["typesense"])
    (cache / "services.json").write_text(json.dumps(state))

    status = _cli(["services", "status"], cache)
    down = _cli(["services", "down"], cache)

    assert _alive(proc.pid), "down signalled a process it did not start"
    assert (folder / "thesis.txt").read_text() == "four years of work\n" and (folder / "sub" / "data.csv").is_file()
    assert status.returncode == 2 and check in status.stdout and "not running" in status.stdout
    assert down.returncode == 2, down.stdout + down.stderr
    assert "stopped" not in down.stdout and "Traceback" not in down.stderr
    assert f"pid {proc.pid} left alone, not signalled: " in down.stderr and check in down.stderr
    assert f"folder {folder} left alone: " in down.stderr  # no marker, or its server not shown to be gone
    # the refused entry stays on record (a second `down` says the same; nothing was forgotten)
    assert json.loads((cache / "services.json").read_text())["typesense"]["pid"] == proc.pid


def test_down_leaves_a_folder_alone_whose_marker_holds_another_token_and_says_so(tmp_path, sleeper):
    cache, folder = tmp_path / "cache", _user_folder(tmp_path)
    mark_folder(folder, "typesense", "b" * 32)
    token = "a" * 32
    proc = sleeper(own_group=True, token=token)
    _record(cache, proc, folder, token)
    down = _cli(["services", "down"], cache)
    assert down.returncode == 2
    assert "Typesense: stopped" in down.stdout and not _alive(proc.pid)  # the process was ours
    assert f"folder {folder} left alone: its marker ({MARKER}) holds another token" in down.stderr
    assert (folder / "thesis.txt").is_file()


def test_down_leaves_alone_a_state_written_without_start_time_and_token(tmp_path, sleeper):
    """A state without the identity fields (an older retbench's) names a pid nothing can vouch for."""
    cache, folder = tmp_path / "cache", _user_folder(tmp_path)
    proc = sleeper(own_group=True)
    cache.mkdir()
    entry = {"label": "Typesense", "pid": proc.pid, "port": 8108, "address": "x", "folder": str(folder)}
    (cache / "services.json").write_text(json.dumps({"typesense": entry}))
    down = _cli(["services", "down"], cache)
    assert down.returncode == 2 and _alive(proc.pid) and (folder / "thesis.txt").is_file()
    assert "recorded without its start time and token" in down.stderr and f"pid {proc.pid}" in down.stderr


@pytest.mark.parametrize("own_group", [True, False], ids=["group-leader", "not-group-leader"])
def test_down_stops_the_process_it_started_and_removes_its_marked_folder(tmp_path, sleeper, own_group):
    """The happy path: every check passes. A verified process outside a group of its own (here: in this
    test's group) gets the signal alone, never its group: this test would die with it."""
    cache, folder = tmp_path / "cache", tmp_path / "retbench-typesense-x"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "db").write_text("index\n")
    folder.with_name(folder.name + ".log").write_text("log\n")
    token = "c" * 32
    mark_folder(folder, "typesense", token)
    proc = sleeper(own_group=own_group, token=token)
    _record(cache, proc, folder, token)

    status = _cli(["services", "status"], cache)
    assert status.returncode == 0 and " running " in status.stdout and "token match" in status.stdout
    down = _cli(["services", "down"], cache)

    assert down.returncode == 0, down.stdout + down.stderr
    group = "process group" if own_group else "process"
    assert f"Typesense: stopped ({group} {proc.pid}; " in down.stdout
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert not folder.exists() and not folder.with_name(folder.name + ".log").exists()
    assert not (cache / "services.json").exists()
    assert _cli(["services", "status"], cache).stdout.strip() == "no servers are up"


def test_down_after_the_server_exited_and_its_pid_was_reused_removes_only_its_marked_folder(tmp_path, sleeper):
    """The server exited (its pid is now a later process): nothing is signalled, its marked folder goes."""
    cache, folder = tmp_path / "cache", tmp_path / "retbench-milvus-y"
    folder.mkdir()
    token = "d" * 32
    mark_folder(folder, "typesense", token)
    proc = sleeper(own_group=True, token=token)
    state = _record(cache, proc, folder, token)
    state["typesense"]["start_time"] -= 100
    (cache / "services.json").write_text(json.dumps(state))
    down = _cli(["services", "down"], cache)
    assert down.returncode == 2 and _alive(proc.pid)
    assert "its start time differs" in down.stderr and "folder" not in down.stderr
    assert not folder.exists()


def test_services_up_on_a_taken_port_names_the_port_and_who_holds_it_and_starts_nothing(tmp_path):
    taken, free = free_port(), free_port()
    config = tmp_path / "stores.yaml"
    config.write_text(
        "name: s\noutput: out\ndatasets: [{name: scifact, split: test}]\nsystems:\n"
        f"  - {{name: pg, adapter: pgvector, params: {{dsn: 'postgresql://postgres@127.0.0.1:{free}/postgres'}}}}\n"
        f"  - {{name: ts, adapter: typesense, params: {{url: 'http://127.0.0.1:{taken}'}}}}\n"
    )
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        up = _cli(["services", "up", str(config)], tmp_path / "cache")
    assert up.returncode == 2 and up.stdout == "" and "Traceback" not in up.stderr
    assert f"Typesense cannot start: port {taken} is taken" in up.stderr
    assert f"pid {os.getpid()} (" in up.stderr  # this test holds it
    assert "starting" not in up.stderr and not (tmp_path / "cache" / "services.json").exists()
