"""`retbench services up|down|status`: the servers a config's systems need, kept up between commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retbench.cli.app import handles_errors
from retbench.errors import InputError

services_app = typer.Typer(
    help="Start on loopback the servers a config's systems need (PostgreSQL + pgvector, Milvus Lite, Typesense).",
    no_args_is_help=True,
)


def config_systems(config: Path) -> list[tuple[str, dict[str, object]]]:
    """(adapter, params) of every system in a config file (`config.study.declared_systems`)."""
    from retbench.config.study import declared_systems  # deferred: CLI start-up loads no config code

    return declared_systems(config)


@services_app.command("up")
@handles_errors
def up(
    config: Annotated[Path, typer.Argument(help="Config whose systems name the servers (e.g. configs/stores.yaml).")],
) -> None:
    """Start the servers on the loopback ports the config names; print `export` lines for their secrets.

    Run `eval "$(retbench services up CONFIG)"` so the secrets reach the shell's environment, then
    `retbench run CONFIG` as often as you like, and `retbench services down` at the end.
    """
    from retbench.services import KINDS, configured_port, needed, require_free_ports, start
    from retbench.services_state import require_none_running, save_state, state_path

    systems = config_systems(config)
    path = state_path()
    require_none_running(path)
    plan = needed(systems)
    if not plan:
        typer.echo(f"# {config}: no system needs a server ({', '.join(sorted(KINDS))} do)", err=True)
        return
    ports = {kind.adapter: configured_port(kind, systems, str(config)) for kind, _ in plan}
    require_free_ports(ports, str(config))
    services = start(systems, detached=True, ports=ports, log=lambda m: typer.echo(f"# {m}", err=True))
    try:
        save_state(services, path)
    except BaseException:
        services.stop()
        raise
    for line in services.exports():
        typer.echo(line)
    typer.echo(f"# state: {path}; stop them with `retbench services down`", err=True)


@services_app.command("down")
@handles_errors
def down() -> None:
    """Stop the servers `services up` started and remove their data folders, after checking each is ours.

    A pid is signalled only while its start time, command line and token match what `up` recorded; a folder
    is removed only if it holds the marker `up` wrote. Anything else is named with the check it failed and
    left alone (exit 2).
    """
    from retbench.services_state import state_path, stop_recorded

    path = state_path()
    report = stop_recorded(path)
    for line in report.done or ([] if report.refused else ["no servers were up"]):
        typer.echo(line)
    if report.refused:
        for line in report.refused:
            typer.echo(line, err=True)
        raise InputError(f"left {len(report.refused)} thing(s) alone (above); their entries stay here", path=path)


@services_app.command("status")
@handles_errors
def status() -> None:
    """The servers `services up` started: address, pid, whether it is still that process, and its bound addresses.

    Exit 2 when a recorded pid now names another process (the state is stale: `services down` leaves it alone).
    """
    from retbench.services_state import state_path
    from retbench.services_state import status as read_status

    path = state_path()
    rows = read_status(path)
    if not rows:
        typer.echo("no servers are up")
        return
    for r in rows:
        state = "running" if r["running"] else "not running"
        bound = ", ".join(r["bound"]) or "-"
        typer.echo(f"{r['label']}: {r['address']}  pid {r['pid']}  {state}  bound {bound}  ({r['check']})")
    stale = [r for r in rows if r["verdict"] in ("replaced", "other")]
    if stale:
        raise InputError(f"{len(stale)} recorded pid(s) are not the servers `services up` started (above)", path=path)
