"""`MeteredBackend`: a sandbox backend whose starts are counted and timed.

It wraps whatever backend the server runs (Docker, a warm pool in front of it, another
runtime) and passes every call through, so start metrics mean the same everywhere:
the time a session waited for a running sandbox, a warm-pool hit included.
"""

from __future__ import annotations

import time
from typing import Any

from orsbox.monitoring.metrics import Metrics
from orsbox.sandbox.base import BackendWrapper, Sandbox, SandboxBackend, SandboxSpec


class MeteredBackend(BackendWrapper):
    def __init__(self, backend: SandboxBackend, metrics: Metrics) -> None:
        super().__init__(backend)
        self.metrics = metrics

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

    def __getattr__(self, name: str) -> Any:  # server_id, engine ... of the wrapped one
        return getattr(self.backend, name)
