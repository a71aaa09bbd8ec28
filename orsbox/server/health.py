"""`/health`: is the server up, and can it start sandboxes?

The server answers even when the Docker engine is down — it is degraded, not dead:
sessions of environments without containers go on, and new container sessions work
again once the engine is back. The engine check is cached briefly so a monitoring loop
or a burst of health checks never queues behind Docker, and bounded, so a hung engine
makes /health say so within `PROBE_TIMEOUT_S` instead of hanging with it.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from orsbox.sandbox import SandboxBackend

CACHE_S = 2.0
PROBE_TIMEOUT_S = 5.0  # a hung engine answers every call only at its 60 s deadline


class HealthProbe:
    """One probe at a time: callers arriving during a probe wait for its answer (at most
    `PROBE_TIMEOUT_S`) rather than getting an answer older than the probe."""

    def __init__(self, backend: SandboxBackend | None) -> None:
        self.backend = backend
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
            if time.monotonic() - self._checked_at >= CACHE_S:
                self._reason = await self._probe(self.backend)
                self._checked_at = time.monotonic()
        if self._reason is None:
            return {"status": "ok", "sandbox": "ok"}
        return {"status": "degraded", "sandbox": self._reason}

    @staticmethod
    async def _probe(backend: SandboxBackend) -> str | None:
        try:
            with anyio.fail_after(PROBE_TIMEOUT_S):
                return await backend.health()
        except TimeoutError:
            return f"the sandbox backend did not answer within {PROBE_TIMEOUT_S:g}s"
        except Exception as e:  # a probe must never fail the endpoint
            return f"{type(e).__name__}: {e}"
