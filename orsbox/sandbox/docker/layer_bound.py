"""A bound on a container's writable layer: how `SandboxLimits.writable_layer_bytes` is kept.

Docker can cap a writable layer itself only with the overlay2 driver over xfs mounted
with project quotas (`--storage-opt size=`); this machine, like most, has overlay2 over
ext4, where the engine refuses the option. So the bound is measured instead: docker's
`SizeRw` (the bytes the container added to its image), which the engine computes by
walking the layer (10-30 ms here, far more under load). Past the bound the container is
removed at once, and the sandbox's calls raise `SandboxGone` with `breach_message`
(naming the bound), which ends the episode as any lost sandbox does.

When it is measured:
- after a call the sandbox answered, in the background (`after_call`): the answer is
  not held back by the walk, and a sandbox making many calls is measured at most once
  every `MIN_GAP_S`, so the walks' cost to the engine stays bounded;
- every `CHECK_PERIOD_S` between calls (`watch`), so a process writing in the
  background is caught too;
- before grading, in the foreground (`check`): the grader never reads a sandbox past
  its bound.

Between two measurements a writer may run past the bound by what it writes in that
time; the bound protects the host's disk from a task that fills it, not a byte count.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from orsbox.errors import SandboxError
from orsbox.sandbox.docker.engine import Engine

log = logging.getLogger("orsbox.sandbox.docker")

CHECK_PERIOD_S = 5.0
MIN_GAP_S = 1.0  # after-call measurements of one sandbox start at least this far apart
MiB = 1024 * 1024


def breach_message(name: str, size_bytes: int, bound_bytes: int) -> str:
    return (
        f"sandbox {name} is gone: it wrote {size_bytes / MiB:.1f} MiB to its filesystem, "
        f"past its storage bound of {bound_bytes / MiB:g} MiB (the task's storage_mb, "
        "SandboxLimits.writable_layer_bytes); the sandbox was stopped"
    )


class LayerBound:
    """Measures one container's writable layer against its bound; `on_breach` is called
    once, with the message, when a measurement passes it."""

    def __init__(
        self,
        engine: Engine,
        container_id: str,
        name: str,
        bound_bytes: int,
        on_breach: Callable[[str], Awaitable[None]],
    ) -> None:
        self.engine = engine
        self.container_id = container_id
        self.name = name
        self.bound_bytes = bound_bytes
        self._on_breach = on_breach
        self.breached: str | None = None
        self._watch: asyncio.Task[None] | None = None
        self._after_call: asyncio.Task[None] | None = None
        self._again = False  # a call was answered while the last measurement ran
        self._last_started = float("-inf")

    async def check(self) -> str | None:
        """Measure now; the breach message once the bound is passed, else None."""
        if self.breached is None:
            size = await self.engine.layer_size(self.container_id)
            if size > self.bound_bytes:
                self.breached = breach_message(self.name, size, self.bound_bytes)
                log.warning("%s", self.breached)
                await self._on_breach(self.breached)
        return self.breached

    def after_call(self) -> None:
        """Measure soon, off the caller's path: once `MIN_GAP_S` has passed since the
        last after-call measurement began, and once more if calls are answered while
        it runs (their writes may have come after its walk)."""
        if self.breached is not None:
            return
        if self._after_call is not None:
            self._again = True
            return
        self._after_call = asyncio.get_running_loop().create_task(self._measure_after_calls())

    async def _measure_after_calls(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.breached is None:
                self._again = False
                await asyncio.sleep(max(0.0, self._last_started + MIN_GAP_S - loop.time()))
                self._last_started = loop.time()
                await self.check()
                if not self._again:
                    return
        except SandboxError:  # the container is gone: nothing left to bound
            return
        finally:
            self._after_call = None

    def watch(self, period_s: float = CHECK_PERIOD_S) -> None:
        """Measure every `period_s` until `stop` (or a breach, or the container's end)."""
        self._watch = asyncio.get_running_loop().create_task(self._watch_loop(period_s))

    def stop(self) -> None:
        for task in (self._watch, self._after_call):
            if task is not None:
                task.cancel()

    async def _watch_loop(self, period_s: float) -> None:
        while self.breached is None:
            await asyncio.sleep(period_s)
            try:
                await self.check()
            except SandboxError:  # the container is gone: nothing left to bound
                return
