"""`retbench services up|down|status`: the servers a config's systems need, kept up between commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from retbench.cli.app import handles_errors

services_app = typer.Typer(
    help="Start on loopback the servers a config's systems need (PostgreSQL + pgvector, Milvus Lite, Typesense).",
    no_args_is_help=True,
)


def config_systems(config: Path) -> list[tuple[str, dict[str, Any]]]:
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
    from retbench.services import KINDS, configured_port, needed, require_none_running, save_state, start, state_path

    systems = config_systems(config)
    path = state_path()
    require_none_running(path)
    plan = needed(systems)
    if not plan:
        typer.echo(f"# {config}: no system needs a server ({', '.join(sorted(KINDS))} do)", err=True)
        return
    ports = {kind.adapter: configured_port(kind, systems, str(config)) for kind, _ in plan}
    services = start(systems, detached=True, ports=ports, log=lambda m: typer.echo(f"# {m}", err=True))
    save_state(services, path)
    for line in services.exports():
        typer.echo(line)
    typer.echo(f"# state: {path}; stop them with `retbench services down`", err=True)


@services_app.command("down")
@handles_errors
def down() -> None:
    """Stop every server `services up` started and remove their data folders."""
    from retbench.services import state_path, stop_recorded

    stopped = stop_recorded(state_path())
    for line in stopped or ["no servers were up"]:
        typer.echo(line)


@services_app.command("status")
@handles_errors
def status() -> None:
    """The servers `services up` started: address, pid, running, and the addresses their port is bound to."""
    from retbench.services import state_path
    from retbench.services import status as read_status

    rows = read_status(state_path())
    if not rows:
        typer.echo("no servers are up")
        return
    for r in rows:
        state = "running" if r["running"] else "not running"
        bound = ", ".join(r["bound"]) or "-"
        typer.echo(f"{r['label']}: {r['address']}  pid {r['pid']}  {state}  bound {bound}")
