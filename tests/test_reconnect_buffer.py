"""The reconnect buffer (orsbox.protocol.calls) keeps a finished call's result for
`linger_s` in a form the cyclic GC does not track: at 600 calls a second it holds
36,000 results, and every object the collector tracks is one more that each full
collection walks while the server's loop waits (docs/operating/sizing.md)."""

from __future__ import annotations

import gc

import pytest

from orsbox.clock import ManualClock
from orsbox.protocol.calls import CallRegistry, Event, FinishedCall

pytestmark = pytest.mark.anyio

CALLS = 1000
LINGER_S = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def finished_calls(registry: CallRegistry, session_id: str) -> list[str]:
    """`CALLS` calls started and waited for; their task ids."""

    async def run() -> list[Event]:
        return [{"event": "end", "data": '{"ok": true}'}]

    records = [registry.start(session_id, run) for _ in range(CALLS)]
    for record in records:
        assert await record.final_events() == [{"event": "end", "data": '{"ok": true}'}]
    return [record.task_id for record in records]


def tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


async def test_a_lingering_result_is_nothing_the_collector_walks() -> None:
    """No tracked object per result, where a record that kept its task, coroutine,
    context, `asyncio.Event` and linger timer held 15 (17 under uvloop)."""
    clock = ManualClock()
    registry = CallRegistry(linger_s=LINGER_S, clock=clock)
    before = tracked()
    task_ids = await finished_calls(registry, "s")
    kept = tracked() - before
    assert kept <= 50, f"{kept / CALLS:.2f} tracked objects per lingering result"
    result = registry.find(task_ids[0], "s")
    assert isinstance(result, FinishedCall)
    assert result.first_events() == [{"event": "task_id", "data": task_ids[0]}]
    assert await result.final_events() == [{"event": "end", "data": '{"ok": true}'}]


async def test_results_are_forgotten_at_the_end_of_their_linger_and_let_go() -> None:
    clock = ManualClock()
    registry = CallRegistry(linger_s=LINGER_S, clock=clock)
    before = tracked()
    first = await finished_calls(registry, "s")
    clock.advance_nowait(LINGER_S / 2)
    second = await finished_calls(registry, "s")
    assert len(registry) == 2 * CALLS
    clock.advance_nowait(LINGER_S / 2 - 0.01)
    assert registry.find(first[-1], "s") is not None
    assert registry.find(first[-1], "another session") is None
    clock.advance_nowait(0.01)
    assert registry.find(first[-1], "s") is None and registry.find(first[0], "s") is None
    assert registry.find(second[0], "s") is not None and len(registry) == CALLS
    clock.advance_nowait(LINGER_S / 2)
    assert len(registry) == 0
    assert tracked() - before <= 50, "forgotten results are still held"
