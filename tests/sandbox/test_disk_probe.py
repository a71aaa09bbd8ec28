"""The disk planner's probe of an image, on the real engine: a burst of plans for one
image not yet cached shares one probe container (ten at once held the server's event
loop for hundreds of milliseconds, issue 23)."""

from __future__ import annotations

import asyncio
from typing import Any

import docker
import pytest

from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker.disk import DiskPlanner
from orsbox.sandbox.docker.engine import Engine

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

LABELS = {"orsbox": "1", "orsbox.server": "test-disk-probe"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CountingEngine(Engine):
    """The real engine, counting the containers it creates (the probes)."""

    def __init__(self, client: docker.DockerClient) -> None:
        super().__init__(client)
        self.created = 0

    async def create(self, options: dict[str, Any]) -> str:
        self.created += 1
        return await super().create(options)


async def test_a_burst_of_plans_shares_one_probe(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    engine = CountingEngine(docker_client)
    planner = DiskPlanner(engine, LABELS)
    spec = SandboxSpec(image=base_image, limits=SandboxLimits(disk_bytes=8 * 1024**2))
    plans = await asyncio.gather(*(planner.plan(spec, 8 * 1024**2) for _ in range(10)))
    assert engine.created == 1
    assert len({plan.folders for plan in plans}) == 1 and plans[0].folders
    await planner.plan(spec, 8 * 1024**2)  # cached now
    assert engine.created == 1
