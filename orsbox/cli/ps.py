"""`orsbox ps`: the sandbox containers orsbox servers started, and whether their owner
still runs (judged from the owner labels, see `orsbox.sandbox.docker.labels`)."""

from __future__ import annotations

import socket
import time
from typing import Any

import docker.errors
from rich.console import Console
from rich.table import Table

from orsbox.sandbox.docker import labels as L
from orsbox.sandbox.docker.engine import read_usage

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


def usage_columns(client: Any, container: dict[str, Any]) -> tuple[str, str]:
    """CPU seconds and peak memory of a running container, "-" where unknown."""
    if container.get("State") != "running":
        return "-", "-"
    try:
        pid = int(
            (client.api.inspect_container(container["Id"]).get("State") or {}).get("Pid") or 0
        )
        usage = read_usage(client.api, container["Id"], pid)
    except docker.errors.DockerException:
        return "-", "-"
    if usage is None:
        return "-", "-"
    return usage_cells(usage.cpu_s, usage.peak_memory_bytes)


def usage_cells(cpu_s: float | None, peak_memory_bytes: int | None) -> tuple[str, str]:
    """CPU seconds and peak memory as table cells (`orsbox ps`, `orsbox episodes`)."""
    cpu = "-" if cpu_s is None else f"{cpu_s:.2f}s"
    memory = "-" if peak_memory_bytes is None else f"{peak_memory_bytes / 2**20:.0f}MiB"
    return cpu, memory


def ps() -> None:
    """List orsbox sandbox containers.

    Shows each one's environment, session, owning server (pid, and whether it still
    runs), status, age, and the CPU time and peak memory it has used so far."""
    from orsbox.cli.build import docker_client

    client = docker_client()
    containers = orsbox_containers(client)
    if not containers:
        out.print("No orsbox containers.")
        return
    table = Table(
        "NAME", "ENVIRONMENT", "SESSION", "SERVER", "OWNER", "STATUS", "AGE", "CPU", "PEAK MEM"
    )
    for c in containers:
        labels = c.get("Labels") or {}
        cpu, memory = usage_columns(client, c)
        table.add_row(
            c["Names"][0].lstrip("/"),
            labels.get("orsbox.environment", "-"),
            labels.get(L.SESSION, "-")[:16],
            f"{labels.get(L.SERVER, '-')} (pid {labels.get(L.PID, '?')})",
            owner_state(labels),
            c.get("Status", ""),
            _age(c.get("Created", time.time())),
            cpu,
            memory,
        )
    out.print(table)
