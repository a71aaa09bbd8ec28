"""`orsbox ps`: the sandbox containers orsbox servers started, and whether their owner
still runs (judged from the owner labels, see `orsbox.sandbox.docker.labels`)."""

from __future__ import annotations

import asyncio
import socket
import time

from rich.console import Console
from rich.table import Table

from orsbox.sandbox.base import SandboxInfo
from orsbox.sandbox.docker import labels as L

out = Console(highlight=False)


def all_sandboxes() -> list[SandboxInfo]:
    """Every sandbox of any orsbox server, running or not, as the backend lists them."""
    from orsbox.cli.backend_options import cli_backend

    async def listing() -> list[SandboxInfo]:
        backend = cli_backend()
        try:
            return await backend.list(all_servers=True)
        finally:
            await backend.close()

    return asyncio.run(listing())


def owner_state(labels: dict[str, str]) -> str:
    """alive, dead (safe to remove), or elsewhere (another host: cannot tell)."""
    if labels.get(L.HOST) != socket.gethostname():
        return "elsewhere"
    return "dead" if L.owner_is_dead(labels) else "alive"


def _age(created: float) -> str:
    seconds = int(time.time() - created)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def ps() -> None:
    """List orsbox sandbox containers.

    Shows each one's environment, session, owning server (pid, and whether it still
    runs), status and age."""
    sandboxes = all_sandboxes()
    if not sandboxes:
        out.print("No orsbox containers.")
        return
    table = Table("NAME", "ENVIRONMENT", "SESSION", "SERVER", "OWNER", "STATUS", "AGE")
    for s in sandboxes:
        labels = s.labels
        table.add_row(
            s.name,
            labels.get("orsbox.environment", "-"),
            s.session_id[:16] or "-",
            f"{s.server_id or '-'} (pid {labels.get(L.PID, '?')})",
            owner_state(labels),
            s.status,
            _age(s.created or time.time()),
        )
    out.print(table)
