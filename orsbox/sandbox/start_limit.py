"""`StartLimit`: how many sandboxes start at once, found by measuring, not guessed.

A start is mostly engine and kernel work (runc, namespaces, cgroups, the guest's python).
Too few at once leave the engine idle between the steps where it waits (locks, disk);
too many only lengthen each start and starve the server and running sandboxes of CPU.
Where the best number lies depends on the machine, its other load, the image and the
runtime, so the limit climbs while it pays: `RateClimber` watches the rate at which
starts complete while others queue (only then does the limit bound anything), raises
the limit by half while each raise brings a clearly faster rate, holds it when the
rate stays level (on a shared machine a level rate is often a gain lost in noise, and
bursts finished sooner at higher limits in bench/), and goes back to the limit that
gave the best rate when the rate clearly falls. The best rate fades while the rate is
level, so the limit is probed again now and then within a long burst (the machine's
other load comes and goes). A window of about one start per slot is one sample; the window
after a change is skipped, as it still shows the old limit. An idle moment ends the
measurement; the limit learned so far is where the next burst begins.

Waiters are served in arrival order (anyio's `CapacityLimiter` is FIFO), and a lowered
limit takes effect as running starts finish.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import anyio

log = logging.getLogger("orsbox.sandbox.start_limit")

GAIN = 0.1  # a rate this much above (below) the best counts as better (worse)
FADE = 0.99  # per level window: the machine's load changes, an old best must not bind


@dataclass
class RateClimber:
    """The policy, free of clocks and locks: feed it completions, read `limit`."""

    limit: int = 4
    minimum: int = 2
    maximum: int = 32
    best_rate: float | None = None  # starts per second at the best limit of this burst
    best_limit: int = 0
    _window_start: float | None = None
    _window_done: int = 0
    _settling: bool = False  # the window after a change still shows the old limit

    def completed(self, now: float, queued: int) -> None:
        """A start finished at `now`; `queued` starts are still waiting for a slot."""
        if queued == 0:  # not saturated: the rate says nothing about the limit
            self._window_start, self._window_done, self.best_rate = None, 0, None
            self._settling = False
            return
        if self._window_start is None:
            self._window_start, self._window_done = now, 0
            return
        self._window_done += 1
        if self._window_done >= self.limit:  # about one start per slot: a fair sample
            rate = self._window_done / max(now - self._window_start, 1e-6)
            before = self.limit
            if not self._settling:
                self._judge(rate)
            self._settling = self.limit != before
            self._window_start, self._window_done = now, 0

    def _judge(self, rate: float) -> None:
        if self.best_rate is None or rate > self.best_rate * (1 + GAIN):
            self.best_rate, self.best_limit = rate, self.limit
            self.limit = min(self.maximum, self.limit + math.ceil(self.limit / 2))
        elif rate < self.best_rate * (1 - GAIN):  # the raise cost: back to the best
            self.limit = max(self.minimum, self.best_limit)
        else:  # level: the best fades, so a rate that holds up soon earns another raise
            self.best_rate *= FADE


class StartLimit:
    """An async slot for each start; `fixed` turns the climbing off."""

    def __init__(
        self,
        initial: int = 4,
        *,
        fixed: bool = False,
        maximum: int = 32,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.climber = RateClimber(limit=initial, minimum=min(2, initial), maximum=maximum)
        self._fixed = fixed
        self._clock = clock
        self._limiter = anyio.CapacityLimiter(initial)
        self._queued = 0

    @property
    def limit(self) -> int:
        return int(self._limiter.total_tokens)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a start slot; a start that finished (not failed) feeds the climber."""
        token = object()  # one borrower per start, whichever task runs it
        self._queued += 1
        try:
            await self._limiter.acquire_on_behalf_of(token)
        finally:
            self._queued -= 1
        try:
            yield
            self._completed()
        finally:
            self._limiter.release_on_behalf_of(token)

    def _completed(self) -> None:
        if self._fixed:
            return
        self.climber.completed(self._clock(), self._queued)
        if self.climber.limit != self.limit:
            log.info(
                "starts at once: %d -> %d (best rate %.1f/s at %d)",
                self.limit,
                self.climber.limit,
                self.climber.best_rate or 0.0,
                self.climber.best_limit,
            )
            self._limiter.total_tokens = self.climber.limit
