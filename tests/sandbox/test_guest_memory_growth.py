"""The gVisor memory watch's growth term (`guest/inside/memory.py`, `MemoryWatch.growth`):
past the bound it kills what holds the excess and what the commands would add before its
kills free anything. The kills themselves are checked under gVisor
(tests/adversarial/test_gvisor_bombs.py)."""

from __future__ import annotations

import pytest

from orsbox.sandbox.guest.inside import memory
from orsbox.sandbox.guest.inside.memory import KILL_LAG_S, MemoryWatch

MIB = 1024**2


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(memory.time, "monotonic", lambda: now[0])
    return now


def test_growth_is_the_recent_rate_over_the_kill_lag(clock: list[float]) -> None:
    watch = MemoryWatch(496 * MIB)
    assert watch.growth(300 * MIB) == 0  # the first look knows no rate
    clock[0] += 0.1
    assert watch.growth(400 * MIB) == pytest.approx(1000 * MIB * KILL_LAG_S, abs=1)
    clock[0] += 0.1
    assert watch.growth(350 * MIB) == 0  # shrinking: nothing to add


def test_a_stale_look_or_a_burst_past_half_the_bound_is_bounded(clock: list[float]) -> None:
    watch = MemoryWatch(496 * MIB)
    watch.growth(100 * MIB)
    clock[0] += 2.0  # idle between calls: the previous look says nothing of now
    assert watch.growth(500 * MIB) == 0
    clock[0] += 0.001
    assert watch.growth(900 * MIB) == 248 * MIB
