"""What `retbench services up` leaves running, and how `status` and `down` read it back.

`services up` (retbench.services.start with `detached=True`) records each server in a state file: pid, port,
address, data folder and what identifies the process (boot id, start time, command line, token), never a secret.
`status` checks each entry against the live process; `stop_recorded` (`services down`) signals a pid only while all
of it still matches (`loopback.ProcessIdentity`) and removes a folder only when its marker holds the token, so
nothing `up` did not start is ever stopped or deleted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.errors import BackendError, InputError
from retbench.llm.local import cache_root
from retbench.loopback import ProcessIdentity, listening_addresses, stop_verified
from retbench.services import KINDS, Services, remove_folder


def state_path() -> Path:
    """Where `services up` records what it started: $RETBENCH_CACHE/services.json, else .retbench-cache/."""
    return cache_root() / "services.json"


def save_state(services: Services, path: Path) -> None:
    """Pids, ports, addresses and folders of detached servers, with what identifies each process (never secrets)."""
    state = {}
    for adapter, s in services.servers.items():
        try:
            identity = ProcessIdentity.read(s.proc.pid, services.tokens[adapter])
        except ProcessLookupError:
            raise BackendError(f"{s.name} exited right after it started on 127.0.0.1:{s.port}") from None
        state[adapter] = {
            "label": KINDS[adapter].label,
            "pid": s.proc.pid,
            "port": s.port,
            "address": s.address,
            "folder": str(s.folder),
            "secret_env": services.secret_envs.get(adapter),
            "boot_id": identity.boot_id,
            "start_time": identity.start_time,
            "cmdline": list(identity.cmdline),
            "token": identity.token,
        }
    _write_state(state, path)


def _write_state(state: Mapping[str, Mapping[str, Any]], path: Path) -> None:
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


def _identity(entry: Mapping[str, Any]) -> ProcessIdentity | None:
    """The recorded identity of a server process; None when the entry lacks one (an older retbench wrote it)."""
    try:
        pid, start_time = entry["pid"], entry["start_time"]
        boot, cmdline, token = entry["boot_id"], entry["cmdline"], entry["token"]
    except KeyError:
        return None
    ok = isinstance(pid, int) and isinstance(start_time, int) and pid > 0
    ok = ok and isinstance(boot, str) and isinstance(token, str) and bool(token) and isinstance(cmdline, list)
    if not ok or not all(isinstance(part, str) for part in cmdline):
        return None
    return ProcessIdentity(pid, boot, start_time, tuple(cmdline), token)


_UNIDENTIFIED = "recorded without its start time and token (not by this version's `services up`)"


def status(path: Path) -> list[dict[str, Any]]:
    """Each recorded server, checked: `running` only while its pid is provably the process `up` started.

    `check` says why (which check failed, or what matched); `bound` lists the addresses its port listens on.
    """
    rows = []
    for adapter, entry in load_state(path).items():
        identity = _identity(entry)
        verdict, why = identity.check() if identity else ("other", _UNIDENTIFIED)
        running = verdict == "ours"
        bound = listening_addresses(int(entry["port"])) if running else set()
        rows.append({"adapter": adapter, **entry, "running": running, "check": why, "verdict": verdict})
        rows[-1]["bound"] = sorted(bound)
    return rows


@dataclass
class DownReport:
    """What `stop_recorded` did (`done`) and what it refused to touch, with the check that failed (`refused`)."""

    done: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def stop_recorded(path: Path, timeout: float = 30) -> DownReport:
    """Stop every server `services up` started and remove its folder, each only after checking it is ours.

    A process is signalled (SIGTERM, SIGKILL after `timeout` s) only while its pid, boot, start time, command
    line and token match the state; a folder is removed only when its marker holds the token, and only once
    its server has stopped or provably exited. Entries that fail a check stay in the state file.
    """
    report = DownReport()
    kept = {}
    for adapter, entry in load_state(path).items():
        label, folder = entry.get("label", adapter), Path(str(entry.get("folder", "")))
        identity = _identity(entry)
        if identity is None:
            report.refused.append(f"{label}: pid {entry['pid']} and folder {folder} left alone: {_UNIDENTIFIED}")
            kept[adapter] = entry
            continue
        outcome, why = stop_verified(identity, timeout)
        if outcome == "stopped":
            report.done.append(f"{label}: {why}")
        elif outcome == "exited":
            report.done.append(f"{label}: was not running ({why})")
        else:
            report.refused.append(f"{label}: pid {identity.pid} left alone, not signalled: {why}")
        if outcome in ("stopped", "exited", "replaced"):  # "replaced": a later process has the pid, ours exited
            refusal = remove_folder(folder, identity.token)
        else:
            refusal = "its server could not be shown to have stopped"
        if refusal:
            report.refused.append(f"{label}: folder {folder} left alone: {refusal}")
        if outcome not in ("stopped", "exited") or refusal:
            kept[adapter] = entry
    if kept:
        _write_state(kept, path)
    else:
        path.unlink(missing_ok=True)
    return report


def require_none_running(path: Path) -> None:
    running = [r for r in status(path) if r["running"]]
    if running:
        names = ", ".join(f"{r['label']} (pid {r['pid']})" for r in running)
        raise InputError(f"servers are already up: {names}; run `retbench services down` first", path=path)
