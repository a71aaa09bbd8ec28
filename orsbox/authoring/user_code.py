"""How orsbox calls code that environment authors wrote.

Authors write sync or async methods. Async ones are awaited on the event loop; sync
ones run in a worker thread, because one slow `setup` or a blocking tool must never
stall other sessions or `/health`. The thread pool has its own generous limit: the
default (40) would let 40 blocked tools starve every other session.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

import anyio
import anyio.to_thread

USER_THREADS = 256

T = TypeVar("T")
# What a hook the author may write sync or async returns: its value, or an awaitable of it
MaybeAsync: TypeAlias = T | Awaitable[T]

_limiter: anyio.CapacityLimiter | None = None


def _thread_limiter() -> anyio.CapacityLimiter:
    global _limiter
    if _limiter is None:
        _limiter = anyio.CapacityLimiter(USER_THREADS)
    return _limiter


@functools.lru_cache(maxsize=4096)
def _is_async_function(fn: Callable[..., Any]) -> bool:
    target = inspect.unwrap(fn)
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__func__", None)
    )


def _is_async(fn: Callable[..., Any]) -> bool:
    """Asked on every tool call, so cached per function: a bound method is a new
    object each time, its `__func__` is not."""
    try:
        return _is_async_function(getattr(fn, "__func__", fn))
    except TypeError:  # unhashable callable
        return _is_async_function.__wrapped__(fn)


async def call_user(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call `fn(*args, **kwargs)` without blocking the event loop; await what it returns
    if that is awaitable (a sync method may return a coroutine)."""
    if _is_async(fn):
        result = fn(*args, **kwargs)
    else:
        call = functools.partial(fn, *args, **kwargs)
        result = await anyio.to_thread.run_sync(call, limiter=_thread_limiter())
    if inspect.isawaitable(result):
        result = await result
    return result
