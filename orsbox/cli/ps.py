"""`orsbox ps`: the sandbox containers orsbox servers started, whether their owner still
runs (as the backend judges it, `SandboxInfo.owner`), and what each running one has
used so far."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from orsbox.errors import SandboxGone
from orsbox.sandbox.base import SandboxBackend, SandboxInfo
from orsbox.sandbox.usage import ResourceUsage

out = Console(highlight=False)


@dataclass(frozen=True)
class Listed:
    """A sandbox as `orsbox ps` shows it: what the backend lists, and its usage."""

    info: SandboxInfo
    usage: ResourceUsage | None


def all_sandboxes(*, with_usage: bool = False) -> list[Listed]:
    """Every sandbox of any orsbox server, running or not, as the backend lists them;
    `with_usage` adds the CPU and peak memory of the running ones."""
    from orsbox.cli.backend_options import cli_backend

    async def listing() -> list[Listed]:
        backend = cli_backend()
        try:
            found = await backend.list(all_servers=True)
            return [
                Listed(s, await _usage(backend, s) if with_usage and _running(s) else None)
                for s in found
            ]
        finally:
            await backend.close()

    return asyncio.run(listing())


async def _usage(backend: SandboxBackend, sandbox: SandboxInfo) -> ResourceUsage | None:
    try:
        return await backend.usage_of(sandbox.id)
    except SandboxGone:  # removed between the listing and this look (a busy host)
        return None


def _running(sandbox: SandboxInfo) -> bool:
    return sandbox.status == "running"


def _age(created: float) -> str:
    seconds = int(time.time() - created)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def usage_cells(cpu_s: float | None, peak_memory_bytes: int | None) -> tuple[str, str]:
    """CPU seconds and peak memory as table cells (`orsbox ps`, `orsbox episodes`)."""
    cpu = "-" if cpu_s is None else f"{cpu_s:.2f}s"
    memory = "-" if peak_memory_bytes is None else f"{peak_memory_bytes / 2**20:.0f}MiB"
    return cpu, memory


def ps() -> None:
    """List orsbox sandbox containers.

    Shows each one's environment, session, the client it counts against (a sandbox of
    the sandbox API: the token's name, `sandbox-token-0` for the first of
    ORSBOX_SANDBOX_TOKENS, also when an environment of that client's session created
    it), owning server (pid, and whether it still runs), status, age, and the CPU time
    and peak memory it has used so far."""
    sandboxes = all_sandboxes(with_usage=True)
    if not sandboxes:
        out.print("No orsbox containers.")
        return
    table = Table(
        *("NAME", "ENVIRONMENT", "SESSION", "CLIENT", "SERVER", "OWNER", "STATUS", "AGE"),
        *("CPU", "PEAK MEM"),
    )
    for listed in sandboxes:
        s, usage = listed.info, listed.usage
        labels = s.labels
        table.add_row(
            s.name,
            labels.get("orsbox.environment", "-"),
            s.session_id[:16] or "-",
            labels.get("orsbox.client", "-"),
            f"{s.server_id or '-'} (pid {'?' if s.owner_pid is None else s.owner_pid})",
            s.owner,
            s.status,
            _age(s.created or time.time()),
            *usage_cells(
                usage.cpu_s if usage else None, usage.peak_memory_bytes if usage else None
            ),
        )
    out.print(table)
