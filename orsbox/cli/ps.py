"""`orsbox ps`: the sandbox containers orsbox servers started, and whether their owner
still runs (judged from the owner labels, see `orsbox.sandbox.docker.labels`)."""

from __future__ import annotations

import socket
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from orsbox.sandbox.docker import labels as L

out = Console(highlight=False)


def orsbox_containers(client: Any) -> list[dict[str, Any]]:
    """Every container labelled `orsbox=1`, running or not."""
    return client.api.containers(all=True, filters={"label": f"{L.ORSBOX}=1"})


def owner_state(labels: dict[str, str]) -> str:
    """alive, dead (safe to remove), or elsewhere (another host: cannot tell)."""
    if labels.get(L.HOST) != socket.gethostname():
        return "elsewhere"
    return "dead" if L.owner_is_dead(labels) else "alive"


def _age(created: int) -> str:
    seconds = int(time.time() - created)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def ps() -> None:
    """List orsbox sandbox containers.

    Shows each one's environment, session, owning server (pid, and whether it still
    runs), status and age."""
    from orsbox.cli.build import docker_client

    containers = orsbox_containers(docker_client())
    if not containers:
        out.print("No orsbox containers.")
        return
    table = Table("NAME", "ENVIRONMENT", "SESSION", "SERVER", "OWNER", "STATUS", "AGE")
    for c in containers:
        labels = c.get("Labels") or {}
        table.add_row(
            c["Names"][0].lstrip("/"),
            labels.get("orsbox.environment", "-"),
            labels.get(L.SESSION, "-")[:16],
            f"{labels.get(L.SERVER, '-')} (pid {labels.get(L.PID, '?')})",
            owner_state(labels),
            c.get("Status", ""),
            _age(c.get("Created", time.time())),
        )
    out.print(table)
