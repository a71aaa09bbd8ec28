"""`LayerBound`'s schedule, with a stand-in for the engine's `SizeRw` read (the real
engine's behaviour is in test_layer_bound.py): after-call measurements run off the
caller's path, coalesce, and catch writes answered while one ran."""

from __future__ import annotations

import asyncio

import pytest

from orsbox.sandbox.docker import layer_bound
from orsbox.sandbox.docker.layer_bound import LayerBound

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Layer:
    """The engine's `layer_size`: the `size` when the read began (the walk sees the
    layer as it was); each read waits for `release`."""

    def __init__(self) -> None:
        self.size = 0
        self.reads = 0
        self.release = asyncio.Event()
        self.read_started = asyncio.Event()

    async def layer_size(self, container_id: str) -> int:
        self.reads += 1
        size = self.size
        self.read_started.set()
        await self.release.wait()
        return size


async def test_calls_answered_during_a_measurement_get_one_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(layer_bound, "MIN_GAP_S", 0.0)
    layer, breaches = Layer(), []

    async def on_breach(message: str) -> None:
        breaches.append(message)

    bound = LayerBound(layer, "c1", "s1", 100, on_breach)  # type: ignore[arg-type]
    bound.after_call()
    await layer.read_started.wait()
    for _ in range(5):  # answered while the first read walks the layer
        bound.after_call()
    layer.size = 500  # ... and one of them wrote past the bound
    layer.release.set()
    while bound._after_call is not None:
        await asyncio.sleep(0)
    assert layer.reads == 2  # the first, and one more for the five
    assert bound.breached is not None and len(breaches) == 1
    bound.after_call()  # past the bound: nothing more to measure
    assert bound._after_call is None and layer.reads == 2


async def test_a_sandbox_within_its_bound_is_measured_once_per_quiet_spell() -> None:
    layer = Layer()
    layer.release.set()
    bound = LayerBound(layer, "c1", "s1", 100, lambda m: asyncio.sleep(0))  # type: ignore[arg-type]
    bound.after_call()
    while bound._after_call is not None:
        await asyncio.sleep(0)
    assert layer.reads == 1 and bound.breached is None
