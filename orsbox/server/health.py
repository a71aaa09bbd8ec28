"""`/health`: is the server up, and can it start sandboxes?

The server answers even when the Docker engine is down — it is degraded, not dead:
sessions of environments without containers go on, and new container sessions work
again once the engine is back. The engine check is cached briefly so a monitoring loop
or a burst of health checks never queues behind Docker, and bounded, so a hung engine
makes /health say so within `PROBE_TIMEOUT_S` instead of hanging with it. Both are
measured on the server's clock (`orsbox.clock`), which a test may move by hand.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

from orsbox.clock import SYSTEM_CLOCK, Clock
from orsbox.sandbox import SandboxBackend

CACHE_S = 2.0
PROBE_TIMEOUT_S = 5.0  # a hung engine answers every call only at its 60 s deadline


class HealthProbe:
    """One probe at a time: callers arriving during a probe wait for its answer (at most
    `PROBE_TIMEOUT_S`) rather than getting an answer older than the probe."""

    def __init__(self, backend: SandboxBackend | None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.backend = backend
        self.clock = clock
        self._checked_at = -CACHE_S
        self._reason: str | None = None
        self._lock = anyio.Lock()

    @property
    def last_ok(self) -> bool | None:
        """The last probe's answer (None: no backend, or not probed yet)."""
        if self.backend is None or self._checked_at < 0:
            return None
        return self._reason is None

    async def report(self) -> dict[str, Any]:
        if self.backend is None:
            return {"status": "ok"}
        async with self._lock:
            if self.clock.monotonic() - self._checked_at >= CACHE_S:
                self._reason = await self._probe(self.backend)
                self._checked_at = self.clock.monotonic()
        if self._reason is None:
            return {"status": "ok", "sandbox": "ok"}
        return {"status": "degraded", "sandbox": self._reason}

    async def _probe(self, backend: SandboxBackend) -> str | None:
        probe = asyncio.ensure_future(backend.health())
        try:
            if not await self.clock.wait(probe, PROBE_TIMEOUT_S):
                return f"the sandbox backend did not answer within {PROBE_TIMEOUT_S:g}s"
            return probe.result()
        except Exception as e:  # a probe must never fail the endpoint
            return f"{type(e).__name__}: {e}"
        finally:
            probe.cancel()  # a hung probe is abandoned
