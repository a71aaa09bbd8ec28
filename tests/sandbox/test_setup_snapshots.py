"""Setup snapshots' bounds and order, on the real engine: entries are
`docker commit`s of a sandbox; the least recently used go first, by count and by size,
and an entry a sandbox runs from is kept until it is free."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import docker
import pytest

from orsbox.authoring import SingleTask
from orsbox.authoring.container import ContainerEnvironment
from orsbox.authoring.environment import EnvironmentContext
from orsbox.authoring.setup_inputs import CONTEXT_SETUP_SNAPSHOTS
from orsbox.sandbox import SandboxBackend, SandboxSpec
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


class _Saved(SingleTask, ContainerEnvironment):
    """A container environment whose (empty) setup is cached."""

    setup_cache = True


class _CountingStarts:
    """The real backend, whose `start` waits until `together` starts are under way (or
    `patience_s` passed) and counts the most there were at once."""

    def __init__(self, backend: SandboxBackend, together: int, patience_s: float) -> None:
        self.backend, self.together, self.patience_s = backend, together, patience_s
        self.under_way = self.most = 0
        self.enough = asyncio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self.backend, name)

    async def start(self, spec: SandboxSpec) -> object:
        self.under_way += 1
        self.most = max(self.most, self.under_way)
        if self.under_way >= self.together:
            self.enough.set()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.enough.wait(), self.patience_s)
            return await self.backend.start(spec)
        finally:
            self.under_way -= 1


async def test_a_groups_sessions_start_from_a_saved_setup_at_once(
    backend: SandboxBackend, base_image: str, docker_client: docker.DockerClient
) -> None:
    """A GRPO group: the first session of a task runs its setup and saves it; the rest
    of the group start from the snapshot together, not one at a time (the look-up is
    one at a time, the start is not)."""
    assert backend.snapshots is not None
    scope = {"orsbox.test": f"group-{uuid.uuid4().hex[:8]}"}
    cache = SetupSnapshots(backend.snapshots, scope=scope)
    starts = _CountingStarts(backend, together=1, patience_s=10)

    def episode(n: int) -> _Saved:
        env = _Saved({})
        extras = {CONTEXT_SETUP_SNAPSHOTS: cache}
        env.orsbox_context = EnvironmentContext(f"group-{n}", starts, extras=extras)
        return env

    envs = [episode(n) for n in range(5)]
    try:
        await asyncio.wait_for(envs[0].setup(), 120)  # sets up and saves
        starts.together, starts.most = 4, 0
        starts.enough.clear()
        await asyncio.wait_for(asyncio.gather(*(env.setup() for env in envs[1:])), 120)
        assert all(env.started_from_snapshot for env in envs[1:])
        assert starts.most == 4, "the group's sandboxes started one at a time"
    finally:
        for env in envs:
            with contextlib.suppress(Exception):
                await env.teardown()
        filters = {"label": [f"{k}={v}" for k, v in scope.items()]}
        for image in docker_client.api.images(filters=filters):
            docker_client.api.remove_image(image["Id"], force=True)


async def test_a_command_as_another_user_waits_for_a_commit_to_end(
    backend: DockerBackend, base_image: str, docker_client: docker.DockerClient
) -> None:
    """A commit pauses the container; an exec started into a paused container hangs in
    runc and holds the container for good (the commit's unpause waits on it: seen as a
    setup snapshot paused for 47 minutes, `docker inspect` of it hanging). A command as
    another user starts an exec (its sub-guest), so it waits for the commit to end."""
    assert backend.snapshots is not None
    scope = {"orsbox.test": f"paused-{uuid.uuid4().hex[:8]}"}
    sandbox = await backend.start(SandboxSpec(image=base_image, session_id="paused"))
    ended: list[str] = []

    async def commit() -> None:
        await backend.snapshots.commit(sandbox, kind="setup", name="paused", labels=scope)  # type: ignore[union-attr]
        ended.append("commit")

    async def as_root() -> None:
        assert (await sandbox.exec(["id", "-un"], user="root")).output == "root\n"
        ended.append("exec")

    try:
        await sandbox.shell("head -c 30000000 /dev/urandom > /workspace/big")  # a slow commit
        committing = asyncio.create_task(commit())
        await wait_until_async(lambda: sandbox.id in backend.engine._paused, 10)
        await asyncio.wait_for(asyncio.gather(committing, as_root()), 60)
        assert ended == ["commit", "exec"]
        assert (await sandbox.exec(["id", "-un"], user="nobody")).output == "nobody\n"
    finally:
        await sandbox.close()
        filters = {"label": [f"{k}={v}" for k, v in scope.items()]}
        for image in docker_client.api.images(filters=filters):
            docker_client.api.remove_image(image["Id"], force=True)
