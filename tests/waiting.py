"""One way for a test to wait: poll the state it needs, never sleep a guessed while.

`wait_until` returns the predicate's first truthy value, so a test can wait for and
use a thing in one step; on timeout it fails with `message` and the last value seen.
`poll_until` is the same loop without the failure, for a fixture that must clean up
before it asserts. The async twin also accepts a predicate that returns an awaitable.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")
INTERVAL_S = 0.02


def poll_until(predicate: Callable[[], T], timeout_s: float, interval_s: float = INTERVAL_S) -> T:
    """The predicate's first truthy value, or its last value once `timeout_s` passed."""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()) and time.monotonic() < deadline:
        time.sleep(interval_s)
    return value


def wait_until(
    predicate: Callable[[], T],
    timeout_s: float,
    interval_s: float = INTERVAL_S,
    message: str = "condition",
) -> T:
    """The predicate's first truthy value; fails the test if none comes in `timeout_s`."""
    value = poll_until(predicate, timeout_s, interval_s)
    assert value, f"not within {timeout_s:g}s: {message} (last: {value!r})"
    return value


async def wait_until_async(
    predicate: Callable[[], T | Awaitable[T]],
    timeout_s: float,
    interval_s: float = INTERVAL_S,
    message: str = "condition",
) -> T:
    """`wait_until` for async tests: sleeps without blocking the event loop."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value or time.monotonic() >= deadline:
            break
        await anyio.sleep(interval_s)
    assert value, f"not within {timeout_s:g}s: {message} (last: {value!r})"
    return value  # type: ignore[return-value]
