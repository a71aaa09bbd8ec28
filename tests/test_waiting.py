"""The shared polling helper returns the first truthy value and fails with its message."""

from __future__ import annotations

import itertools

import pytest

from tests.waiting import poll_until, wait_until, wait_until_async


def test_wait_until_returns_the_first_truthy_value() -> None:
    values = iter([0, None, "", "ready", "later"])
    assert wait_until(lambda: next(values), timeout_s=5) == "ready"


def test_wait_until_fails_naming_what_it_waited_for_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"not within 0.05s: the thing \(last: \[\]\)"):
        wait_until(list, timeout_s=0.05, message="the thing")


def test_poll_until_gives_the_last_value_instead_of_failing() -> None:
    counter = itertools.count()
    assert poll_until(lambda: next(counter) and False, timeout_s=0.05) is False
    assert next(counter) > 2  # it kept asking until the deadline


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_async_twin_awaits_an_awaitable_predicate(anyio_backend: str) -> None:
    answers = iter([0, 0, 7])

    async def probe() -> int:
        return next(answers)

    assert await wait_until_async(probe, timeout_s=5) == 7
    with pytest.raises(AssertionError, match="not within"):
        await wait_until_async(lambda: None, timeout_s=0.05)
