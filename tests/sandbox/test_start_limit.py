"""The measured start limit, against model engines (no Docker, fake clocks)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from orsbox.sandbox.start_limit import RateClimber, StartLimit


def burst(climber: RateClimber, rate_at: Callable[[int], float], starts: int) -> list[int]:
    """Feed `starts` completions, all with others queued, spaced as an engine whose
    rate (starts per second) at a limit is `rate_at(limit)`; the limits seen."""
    now, seen = 0.0, []
    for _ in range(starts):
        now += 1 / rate_at(climber.limit)
        climber.completed(now, queued=10)
        seen.append(climber.limit)
    return seen


def test_the_limit_climbs_while_it_pays_and_never_falls_below_the_knee() -> None:
    climber = RateClimber(limit=4, maximum=32)
    seen = burst(climber, lambda limit: min(limit, 12) * 1.0, 300)  # saturates at 12
    assert seen[0] == 4 and seen.index(14) < 60  # 4, 6, 9, 14: each raise paid
    assert min(seen[60:]) >= 12  # a level rate is held, never taken for a loss


def test_a_raise_that_slows_starts_down_is_taken_back() -> None:
    climber = RateClimber(limit=4, maximum=32)
    # thrashing past 6 at once: each start slower than the extra parallelism gains
    seen = burst(climber, lambda limit: float(limit) if limit <= 6 else 6.0 * 6 / limit / 1.5, 300)
    assert climber.best_limit == 6 and max(seen) == 9  # probed 9, never further
    assert seen[100:].count(6) > 0.6 * len(seen[100:])  # mostly at the best limit


def test_the_limit_stays_within_its_bounds() -> None:
    climber = RateClimber(limit=4, maximum=10)
    burst(climber, lambda limit: float(limit), 300)  # every raise pays
    assert climber.limit == 10


def test_no_queue_no_measurement() -> None:
    climber = RateClimber(limit=4)
    for i in range(100):
        climber.completed(i * 0.01, queued=0)  # fast, but nothing was waiting
    assert climber.limit == 4 and climber.best_rate is None


@pytest.mark.anyio
async def test_start_limit_applies_what_the_climber_learns() -> None:
    now = [0.0]
    limit = StartLimit(2, clock=lambda: now[0])
    running, most = 0, 0

    async def start() -> None:
        nonlocal running, most
        async with limit.slot():
            running += 1
            most = max(most, running)
            await anyio.sleep(0)
            now[0] += 0.1 / running  # a start is faster the more run at once
            running -= 1

    async with anyio.create_task_group() as tg:
        for _ in range(60):
            tg.start_soon(start)
    assert limit.limit > 2 and most > 2  # raised, and the raise was used


@pytest.mark.anyio
async def test_a_fixed_limit_never_moves() -> None:
    limit = StartLimit(3, fixed=True)
    running, most = 0, 0

    async def start() -> None:
        nonlocal running, most
        async with limit.slot():
            running += 1
            most = max(most, running)
            await anyio.sleep(0.001)
            running -= 1

    async with anyio.create_task_group() as tg:
        for _ in range(30):
            tg.start_soon(start)
    assert limit.limit == 3 and most == 3
