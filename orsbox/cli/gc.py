"""`orsbox gc`: remove sandbox containers that servers which died left behind."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.console import Console

from orsbox.cli.ps import all_sandboxes, owner_state
from orsbox.errors import SandboxError

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
    from orsbox.cli.backend_options import cli_backend

    sandboxes = all_sandboxes()
    doomed = [s for s in sandboxes if all_containers or owner_state(s.labels) == "dead"]
    kept = len(sandboxes) - len(doomed)

    async def remove_all() -> int:
        backend, removed = cli_backend(), 0
        try:
            for s in doomed:
                try:
                    await backend.remove(s.id)
                except SandboxError as e:  # gone meanwhile, or removal already in progress
                    out.print(f"could not remove {s.name}: {e}")
                    continue
                out.print(f"removed {s.name} (owner {owner_state(s.labels)})")
                removed += 1
        finally:
            await backend.close()
        return removed

    removed = asyncio.run(remove_all())
    note = f"; kept {kept} of live or remote servers (--all removes them)" if kept else ""
    out.print(f"{removed} container(s) removed{note}.")
