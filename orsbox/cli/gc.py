"""`orsbox gc`: remove sandbox containers that servers which died left behind."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from orsbox.cli.ps import orsbox_containers, owner_state

out = Console(highlight=False)


def gc(
    all_containers: Annotated[
        bool,
        typer.Option(
            "--all",
            help="remove every orsbox container, also those of running servers (their "
            "sessions break) and of other hosts",
        ),
    ] = False,
) -> None:
    """Remove orsbox containers that dead servers left behind.

    A server is dead when it ran on this host and its pid is gone or now belongs to
    another process. Containers of running servers, and of other hosts, stay unless
    --all."""
    from orsbox.cli.build import docker_client

    client = docker_client()
    removed, kept = 0, 0
    for c in orsbox_containers(client):
        name = c["Names"][0].lstrip("/")
        state = owner_state(c.get("Labels") or {})
        if state != "dead" and not all_containers:
            kept += 1
            continue
        try:
            client.api.remove_container(c["Id"], force=True)
        except Exception as e:  # gone meanwhile, or removal already in progress
            out.print(f"could not remove {name}: {e}")
            continue
        out.print(f"removed {name} (owner {state})")
        removed += 1
    note = f"; kept {kept} of live or remote servers (--all removes them)" if kept else ""
    out.print(f"{removed} container(s) removed{note}.")
