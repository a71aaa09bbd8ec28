"""`MeteredBackend`: a sandbox backend whose starts are counted and timed.

It wraps whatever backend the server runs (Docker, a warm pool in front of it, another
runtime) and passes every call through, so start metrics mean the same everywhere:
the time a session waited for a running sandbox, a warm-pool hit included.
"""

from __future__ import annotations

import time
from typing import Any

from orsbox.observe.metrics import Metrics
from orsbox.sandbox.base import Sandbox, SandboxBackend, SandboxInfo, SandboxSpec


class MeteredBackend(SandboxBackend):
    def __init__(self, backend: SandboxBackend, metrics: Metrics) -> None:
        self.backend = backend
        self.metrics = metrics

    @property
    def kind(self) -> Any:  # type: ignore[override]
        return self.backend.kind

    @property
    def snapshots(self) -> Any:  # type: ignore[override]
        """The wrapped backend's (forks and the prepared cache commit through it);
        `__getattr__` would not see it, the base class names it."""
        return getattr(self.backend, "snapshots", None)

    async def start(self, spec: SandboxSpec) -> Sandbox:
        started = time.monotonic()
        try:
            sandbox = await self.backend.start(spec)
        except BaseException as e:
            self.metrics.sandbox_starts.labels(type(e).__name__).inc()
            raise
        self.metrics.sandbox_starts.labels("ok").inc()
        self.metrics.sandbox_start_seconds.observe(time.monotonic() - started)
        return sandbox

    async def list(self, *, all_servers: bool = False) -> list[SandboxInfo]:
        return await self.backend.list(all_servers=all_servers)

    async def sweep(self) -> int:
        return await self.backend.sweep()

    async def close(self) -> None:
        await self.backend.close()

    async def health(self) -> str | None:
        return await self.backend.health()

    def __getattr__(self, name: str) -> Any:  # server_id, engine ... of the wrapped one
        return getattr(self.backend, name)
