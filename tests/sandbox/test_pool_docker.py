"""The warm pool over the real Docker backend: labels, hand-over, refill, close."""

from __future__ import annotations

import uuid

import docker
import pytest

from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.pool import WarmPool
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def containers(
    client: docker.DockerClient, **labels: str
) -> list[docker.models.containers.Container]:
    filters = ["orsbox=1", *(f"{k}={v}" for k, v in labels.items())]
    return client.containers.list(all=True, filters={"label": filters})


async def test_pooled_containers_are_labelled_handed_over_refilled_and_removed(
    base_image: str, docker_client: docker.DockerClient
) -> None:
    server_id = f"test-pool-{uuid.uuid4().hex[:10]}"
    pool = WarmPool(DockerBackend(server_id=server_id), 2)
    spec = SandboxSpec(image=base_image, session_id="episode-1")
    try:
        pool.prewarm([spec])
        await wait_until_async(lambda: pool.idle_count() == 2, 60)
        pooled = containers(docker_client, **{"orsbox.server": server_id})
        assert len(pooled) == 2
        for container in pooled:  # owner labels: swept like any other when we die
            assert container.labels["orsbox.session"] == "pool"
            assert container.labels["orsbox.pid"] and container.labels["orsbox.pid_start"]

        sandbox = await pool.start(spec)
        assert sandbox.id in {c.id for c in pooled}
        assert (await sandbox.shell("echo hi")).output == "hi\n"
        sessions = {info.id: info.session_id for info in await pool.list()}
        assert sessions[sandbox.id] == "episode-1"

        await wait_until_async(lambda: pool.idle_count() == 2, 60)  # refilled
        assert len(containers(docker_client, **{"orsbox.server": server_id})) == 3

        # an idle container killed under the pool is never handed out
        victim = next(
            c
            for c in containers(
                docker_client, **{"orsbox.session": "pool", "orsbox.server": server_id}
            )
        )
        victim.kill()
        await wait_until_async(
            lambda: (
                not any(
                    s.id == victim.id and s.alive for sh in pool._shelves.values() for s in sh.idle
                )
            ),
            10,
        )
        other = await pool.start(spec.model_copy(update={"session_id": "episode-2"}))
        assert other.id != victim.id and (await other.shell("echo ok")).output == "ok\n"
        await sandbox.close()
    finally:
        await pool.close()
    assert containers(docker_client, **{"orsbox.server": server_id}) == []
