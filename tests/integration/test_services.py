"""`retbench services` and `local_services`: real servers on loopback, started and always stopped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import SCIFACT
from retbench.services import local_services, needed, state_path
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
        # the state file records where the servers are, never the secret
        saved = (tmp_path / "cache" / "services.json").read_text()
        assert exports["MY_PG_SECRET"] not in saved
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
    assert down.returncode == 0 and down.stdout.count("stopped") == 2
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
