"""Clocks: where the server's timeouts, reapers and pollers read the time and wait.

Code that measures a timeout (a session's inactivity or lease, an id's reservation, a
warm shelf's idle TTL, an API sandbox's idleness, an episode's time limit), wakes up now
and then (the reapers, the pool's tidying, an SSE stream's keep-alives) or waits for
something at most so long (a request for a session still in setup) takes a `Clock`,
`SYSTEM_CLOCK` unless told otherwise, and never reads `time` or sleeps on its own. A
test hands it a `ManualClock` and moves time itself, so it proves "reaped after the
timeout, not before" without waiting the timeout out:

    clock = ManualClock()
    manager = SessionManager(settings, clock=clock)
    reaper = asyncio.create_task(manager.reap_forever())
    await clock.sleepers(1)            # the reaper is waiting for its next look
    await clock.advance(timeout + 1)   # returns once the reaper has looked again

What is measured for its own sake stays on the real clock: durations logged or put in
metrics, a poll for an engine, a command's timeout inside a sandbox.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol


class Clock(Protocol):
    """Monotonic seconds, and waits measured in them."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    async def wait(self, future: asyncio.Future[Any], timeout_s: float) -> bool:
        """Wait for `future` at most `timeout_s`; whether it is done. It is left
        running either way (cancel it if it is no longer wanted)."""
        ...


class SystemClock:
    """The real clock: `time.monotonic` and `asyncio.sleep`."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait(self, future: asyncio.Future[Any], timeout_s: float) -> bool:
        done, _ = await asyncio.wait({future}, timeout=timeout_s)
        return bool(done)


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when a test says so (asyncio only).

    A sleeper wakes when `advance` carries the time to its deadline, never before.
    `advance` returns once every task it woke has run up to its next sleep on this
    clock, or to its end, so a test reads the outcome without polling; a woken task
    that waits on something else the test must provide would make it hang (use
    `advance_nowait` there). `sleepers(n)` waits until `n` tasks sleep on the clock:
    a loop started in the background has reached its first wait."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleeping: dict[asyncio.Task[object], tuple[float, asyncio.Future[None]]] = {}
        self._changed: asyncio.Event | None = None
        self._watched: set[asyncio.Task[object]] = set()  # their end is a change too

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        await self._sleep_until(self.now + seconds, None)

    async def wait(self, future: asyncio.Future[Any], timeout_s: float) -> bool:
        """While it waits, the task counts as a sleeper, woken by `advance` or by
        `future`."""
        if not future.done():
            await self._sleep_until(self.now + timeout_s, future)
        return future.done()

    async def _sleep_until(self, deadline: float, future: asyncio.Future[Any] | None) -> None:
        task = asyncio.current_task()
        assert task is not None, "a ManualClock is waited on in a task"
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleeping[task] = (deadline, woken)
        if task not in self._watched:
            self._watched.add(task)
            task.add_done_callback(self._ended)
        self._notify()
        try:
            if future is None:
                await woken
            else:
                await asyncio.wait({woken, future}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._sleeping.pop(task, None)

    def advance_nowait(self, seconds: float) -> list[asyncio.Task[object]]:
        """Move the time on and wake every sleeper now due; the tasks woken."""
        assert seconds >= 0, "a monotonic clock does not go back"
        self.now += seconds
        due = [task for task, (at, _) in self._sleeping.items() if at <= self.now]
        for task in due:
            _, woken = self._sleeping.pop(task)
            if not woken.done():
                woken.set_result(None)
        return due

    async def advance(self, seconds: float) -> None:
        """`advance_nowait`, then wait until each task woken sleeps again or ends."""
        woken = self.advance_nowait(seconds)
        await self._until(lambda: all(t.done() or t in self._sleeping for t in woken))

    async def sleepers(self, count: int) -> None:
        """Wait until at least `count` tasks sleep on this clock."""
        await self._until(lambda: len(self._sleeping) >= count)

    def sleeping(self) -> int:
        return len(self._sleeping)

    async def _until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            changed = self._changed = self._changed or asyncio.Event()
            changed.clear()
            await changed.wait()

    def _ended(self, task: asyncio.Task[object]) -> None:
        self._watched.discard(task)
        self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()


async def wait_for_event(clock: Clock, event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for `event` at most `timeout_s` of `clock`; whether it is set."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        return await clock.wait(waiter, timeout_s)
    finally:
        waiter.cancel()
