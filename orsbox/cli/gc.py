"""`orsbox gc`: remove what servers which died left behind, and keep the setup snapshots
within their bounds.

* sandbox containers of dead servers (and, with --all, of every server);
* fork images of dead servers (`orsbox.server.forks`);
* what dead servers left on the host outside their sandboxes, as the backend sweeps it
  (`SandboxBackend.sweep_host_state`, in the backend's words; Docker: the egress guard's
  rules and proxies, and the networks they created that no container is on);
* setup snapshots (`orsbox.sandbox.setup_snapshots`): listed, then the least recently
  used removed past `ORSBOX_SETUP_SNAPSHOTS_MAX_ENTRIES` / `_MAX_BYTES` (the bounds a
  server applies), or all of them (of one environment with --environment) with
  --setup-snapshots (formerly --prepared, still accepted). One a sandbox still runs
  from is kept.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from orsbox.errors import SandboxError

if TYPE_CHECKING:
    from orsbox.sandbox.base import SandboxBackend
    from orsbox.sandbox.snapshots import Snapshot, SnapshotStore

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
    setup_snapshots: Annotated[
        bool,
        typer.Option(
            "--setup-snapshots", "--prepared", help="remove every setup snapshot (saved setup)"
        ),
    ] = False,
    environment: Annotated[
        str | None,
        typer.Option(help="with --setup-snapshots: only this environment's"),
    ] = None,
) -> None:
    """Remove orsbox containers and fork images that dead servers left behind; list the
    setup snapshots and prune them to their bounds (or remove them with --setup-snapshots).

    A server is dead when it ran on this host and its pid is gone or now belongs to
    another process. Containers of running servers, and of other hosts, stay unless
    --all."""
    from orsbox.cli.backend_options import cli_backend

    async def collect() -> None:
        backend = cli_backend()
        try:
            await _containers(backend, all_containers)
            await _host_state(backend, all_containers)
            if backend.snapshots is not None:
                await _images(backend.snapshots, setup_snapshots, environment)
        finally:
            await backend.close()

    asyncio.run(collect())


async def _containers(backend: SandboxBackend, everything: bool) -> None:
    sandboxes = await backend.list(all_servers=True)
    doomed = [s for s in sandboxes if everything or s.owner == "dead"]
    removed = 0
    for s in doomed:
        try:
            await backend.remove(s.id)
        except SandboxError as e:  # gone meanwhile, or removal already in progress
            out.print(f"could not remove {s.name}: {e}")
            continue
        out.print(f"removed {s.name} (owner {s.owner})")
        removed += 1
    kept = len(sandboxes) - len(doomed)
    note = f"; kept {kept} of live or remote servers (--all removes them)" if kept else ""
    out.print(f"{removed} container(s) removed{note}.")


async def _host_state(backend: SandboxBackend, everything: bool) -> None:
    """What dead servers left on the host outside their sandboxes (nothing to say for a
    backend that leaves nothing there)."""
    swept = await backend.sweep_host_state(everything=everything)
    for line in swept.lines if swept is not None else ():
        out.print(line)


async def _images(store: SnapshotStore, everything: bool, environment: str | None) -> None:
    """Fork images of dead servers, and the setup snapshots pruned to their bounds."""
    from orsbox.sandbox.setup_snapshots import ENVIRONMENT, SetupSnapshots
    from orsbox.settings import Settings

    forks = await store.sweep()
    out.print(f"{forks} fork image(s) of dead servers removed.")
    settings = Settings()
    cache = SetupSnapshots(
        store,
        max_entries=0 if everything else settings.setup_snapshots_max_entries,
        max_bytes=0 if everything else settings.setup_snapshots_max_bytes,
    )
    entries = await cache.entries()
    if environment is not None:
        entries = [e for e in entries if e.labels.get(ENVIRONMENT) == environment.lower()]
    _show(entries)
    if everything:
        gone = [e for e in entries if await store.remove(e.ref)]
    else:
        gone = await cache.evict()
    out.print(f"{len(gone)} setup snapshot(s) removed; {len(entries) - len(gone)} kept.")


def _show(entries: list[Snapshot]) -> None:
    if not entries:
        out.print("No setup snapshots.")
        return
    table = Table("SETUP SNAPSHOT", "ENVIRONMENT", "SIZE", "LAST USED")
    for e in entries:
        used = datetime.datetime.fromtimestamp(e.last_used).isoformat(timespec="seconds")
        table.add_row(e.name, e.labels.get("orsbox.environment", "-"), _size(e.size_bytes), used)
    out.print(table)


def _size(n: int) -> str:
    if n < 1024**2:
        return f"{n / 1024:.0f} KB"
    return f"{n / 1024**2:.1f} MB" if n < 1024**3 else f"{n / 1024**3:.2f} GB"
