"""Sessions a client abandons: the lease and the inactivity timeout, on a moved clock.

A session whose client pings holds a lease (`session_lease_s`): it lives as long as the
pings come, however long its model takes over a turn, and is reaped a lease after the
last one. A session whose client never pings keeps the inactivity timeout. The clock is
the manager's own (`SessionManager(clock=ManualClock())`), so nothing here waits for time
to pass;
tests/test_abandoned_sessions.py has the same with real clients and processes.
"""

from __future__ import annotations

import pytest

from orsbox import Environment, TextBlock, ToolOutput, tool
from orsbox.clock import ManualClock
from orsbox.server.sessions import SessionManager
from orsbox.settings import Settings

LEASE_S, TIMEOUT_S = 60.0, 900.0


class Quiet(Environment):
    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{}]

    def get_prompt(self):
        return [TextBlock(text="think, then call")]

    @tool
    def answer(self) -> ToolOutput:
        """Answer."""
        return ToolOutput(blocks=[TextBlock(text="ok")], reward=1.0, finished=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _manager(clock: ManualClock, **settings: float) -> SessionManager:
    config = Settings(**{"session_lease_s": LEASE_S, "session_timeout_s": TIMEOUT_S, **settings})
    return SessionManager(config, clock=clock)


async def _start(manager: SessionManager) -> str:
    sid = manager.new_id()
    session = manager.create(sid, "quiet", Quiet, {}, {})
    await session.ready.wait()
    return sid


@pytest.mark.anyio
async def test_a_pinging_client_keeps_its_session_through_a_long_turn() -> None:
    """Half an hour of pings every 10 s and no call: the model is slow, not gone."""
    clock = ManualClock()
    manager = await _manager(clock)
    sid = await _start(manager)
    for _ in range(180):
        clock.now += 10
        manager.get(sid, owner=None, ping=True)
        assert manager.idle_sessions() == {}
    assert manager.live()[0].idle_for(clock.now) == pytest.approx(1800)
    manager.get(sid, owner=None)  # the model's next call comes
    assert manager.live()[0].idle_for(clock.now) == 0
    await manager.close_all()


@pytest.mark.anyio
async def test_a_client_that_stops_pinging_loses_its_session_a_lease_later() -> None:
    clock = ManualClock()
    manager = await _manager(clock)
    sid = await _start(manager)
    manager.get(sid, owner=None, ping=True)  # the client's first ping, right after /create
    clock.now += LEASE_S
    assert manager.idle_sessions() == {}  # a lease is not over at its last second
    clock.now += 0.5
    assert manager.idle_sessions() == {sid: "lease"}
    assert await manager.reap() == {sid: "lease"}
    assert len(manager) == 0
    with pytest.raises(Exception, match="reaped"):
        manager.get(sid, owner=None)


@pytest.mark.anyio
async def test_a_client_that_never_pings_keeps_the_inactivity_timeout() -> None:
    clock = ManualClock()
    manager = await _manager(clock)
    sid = await _start(manager)
    clock.now += LEASE_S * 10
    assert manager.idle_sessions() == {}
    manager.get(sid, owner=None)  # a request, not a ping
    clock.now += TIMEOUT_S + 1
    assert manager.idle_sessions() == {sid: "inactivity"}
    await manager.close_all()


@pytest.mark.anyio
async def test_a_call_in_flight_is_never_reaped() -> None:
    clock = ManualClock()
    manager = await _manager(clock)
    sid = await _start(manager)
    manager.get(sid, owner=None, ping=True)
    session = manager.live()[0]
    with session.in_call():
        clock.now += TIMEOUT_S * 2
        assert manager.idle_sessions() == {}
        assert session.idle_for(clock.now) is None
    assert manager.idle_sessions() == {sid: "lease"}  # the call's end is no ping
    await manager.close_all()


@pytest.mark.anyio
async def test_a_lease_of_zero_is_off() -> None:
    clock = ManualClock()
    manager = await _manager(clock, session_lease_s=0)
    sid = await _start(manager)
    manager.get(sid, owner=None, ping=True)
    clock.now += TIMEOUT_S - 1
    assert manager.idle_sessions() == {}
    clock.now += 2
    assert manager.idle_sessions() == {sid: "inactivity"}
    await manager.close_all()
