"""The manual clock the timeout tests drive: a sleeper wakes at its deadline and not
before, and `advance` returns once what it woke has run to its next sleep or its end."""

from __future__ import annotations

import asyncio

import pytest

from orsbox.clock import SYSTEM_CLOCK, ManualClock

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_sleeper_wakes_at_its_deadline_not_before() -> None:
    clock = ManualClock()
    woke: list[float] = []

    async def sleeper() -> None:
        await clock.sleep(10)
        woke.append(clock.monotonic())

    task = asyncio.create_task(sleeper())
    await clock.sleepers(1)
    await clock.advance(9.99)
    assert woke == [] and clock.sleeping() == 1
    await clock.advance(0.01)
    assert woke == [1010.0] and task.done()


async def test_advance_returns_once_a_loop_has_done_its_work_and_sleeps_again() -> None:
    clock = ManualClock()
    looks: list[float] = []

    async def poller() -> None:
        while True:
            await clock.sleep(1)
            await asyncio.sleep(0)  # work that yields to the loop on its way
            looks.append(clock.monotonic())

    task = asyncio.create_task(poller())
    await clock.sleepers(1)
    for _ in range(3):
        await clock.advance(1)
    assert looks == [1001.0, 1002.0, 1003.0]
    await clock.advance(0.5)
    assert len(looks) == 3
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert clock.sleeping() == 0  # a cancelled sleeper leaves no trace


async def test_the_system_clock_is_the_real_one() -> None:
    before = SYSTEM_CLOCK.monotonic()
    await SYSTEM_CLOCK.sleep(0)
    assert SYSTEM_CLOCK.monotonic() >= before


async def test_a_wait_ends_with_its_future_or_at_its_timeout() -> None:
    clock = ManualClock()
    for finish in (True, False):
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = asyncio.create_task(clock.wait(future, 5))
        await clock.sleepers(1)
        if finish:
            future.set_result(None)  # no time passes
        else:
            await clock.advance(4.99)
            assert not waiting.done()
            await clock.advance(0.01)
        assert await waiting is finish
        assert clock.sleeping() == 0
