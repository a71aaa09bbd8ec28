"""Setup snapshots' bounds and order, on the real engine: entries are
`docker commit`s of a sandbox; the least recently used go first, by count and by size,
and an entry a sandbox runs from is kept until it is free."""

from __future__ import annotations

import uuid

import docker
import pytest

from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.setup_snapshots import KEY, SetupSnapshots
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

MIB = 1024**2


async def test_least_recently_used_entries_go_past_the_bounds(
    backend: DockerBackend, base_image: str, docker_client: docker.DockerClient
) -> None:
    scope = {"orsbox.test": f"evict-{uuid.uuid4().hex[:8]}"}
    assert backend.snapshots is not None
    cache = SetupSnapshots(backend.snapshots, max_entries=2, max_bytes=100 * MIB, scope=scope)
    sandbox = await backend.start(SandboxSpec(image=base_image, session_id="evict"))

    async def keys() -> list[str]:
        return [e.labels[KEY] for e in await cache.entries()]  # least recently used first

    async def order_is(expected: list[str]) -> bool:
        return await keys() == expected

    try:
        await cache.save(sandbox, "k0", "env", "evict")
        await cache.save(sandbox, "k1", "env", "evict")
        assert await cache.lookup("k0") is not None  # used: now newer than k1
        await wait_until_async(lambda: order_is(["k1", "k0"]), 10)
        await cache.save(sandbox, "k2", "env", "evict")  # 3 entries, bound 2: k1 goes
        assert await keys() == ["k0", "k2"]
        assert await cache.lookup("k1") is None

        cache.max_entries = 10  # now the size bound: 12 MB saved, 5 MB allowed
        cache.max_bytes = 5 * MIB
        await sandbox.shell("head -c 12000000 /dev/urandom > /workspace/big")
        await cache.save(sandbox, "k3", "env", "evict")  # the rest go; the new one stays
        (big,) = await cache.entries()
        assert big.labels[KEY] == "k3" and big.size_bytes >= 12_000_000

        running = await backend.start(SandboxSpec(image=big.ref, session_id="evict-2"))
        assert (await running.shell("wc -c < /workspace/big")).output == "12000000\n"
        assert await cache.evict() == []  # over the bound, but in use: kept
        await running.close()
        assert [e.labels[KEY] for e in await cache.evict()] == ["k3"]
        assert await keys() == []
    finally:
        await sandbox.close()
        filters = {"label": [f"{k}={v}" for k, v in scope.items()]}
        for image in docker_client.api.images(filters=filters):
            docker_client.api.remove_image(image["Id"], force=True)
