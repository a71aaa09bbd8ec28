"""The `openreward` client's `AsyncSandboxesAPI`, unmodified: runs, copies between two
sandboxes, network policy changes (on a server whose operator allows network)."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from openreward import AsyncOpenReward
from openreward.api.sandboxes.types import SandboxNetworkPolicy

from tests.sandbox_api.conftest import TOKEN_A, api_server_settings, sandbox_settings
from tests.servers import LiveServer, start_server

pytestmark = pytest.mark.anyio

CLOSED = SandboxNetworkPolicy(rules=[], presets=[])
OPENED = SandboxNetworkPolicy(rules=[{"action": "allow", "host": "example.com"}])
INTERFACES = "ls /sys/class/net | sort | tr '\\n' ' '"


@pytest.fixture(scope="module")
def network_server(
    tmp_path_factory: pytest.TempPathFactory, base_image: str
) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("sandbox-api-network")
    settings = api_server_settings(allow_network=1, image_map=f"python:3.11-slim={base_image}")
    server = start_server(["tests/fixture_envs/protocol_envs.py:Protocol"], tmp, **settings)
    yield server
    server.stop()


async def test_run_concurrently(session_url: str, base_image: str) -> None:
    async with AsyncOpenReward(api_key=TOKEN_A).sandbox(sandbox_settings(base_image)) as box:
        results = await asyncio.gather(*(box.run(f"sleep 1; echo {i}") for i in range(4)))
        assert [r.output for r in results] == ["0", "1", "2", "3"]


async def test_copy_between_two_sandboxes(
    session_url: str, base_image: str, tmp_path: Path
) -> None:
    data = os.urandom(9 * 1024 * 1024 + 7)  # three chunks, the last one short
    (tmp_path / "in.bin").write_bytes(data)
    client = AsyncOpenReward(api_key=TOKEN_A)
    settings = sandbox_settings(base_image)
    async with client.sandbox(settings) as source, client.sandbox(settings) as target:
        await source.upload_from(tmp_path / "in.bin", "/tmp/src.bin")
        copied = await source.copy_to(target, "/tmp/src.bin", "/tmp/copied/dst.bin")
        assert copied.sha256 == hashlib.sha256(data).hexdigest()
        stat = await target.stat_file("/tmp/copied/dst.bin", sha256=True)
        assert stat == {"size": len(data), "sha256": copied.sha256}
        await source.check_run("touch /tmp/empty")
        empty = await source.copy_to(target, "/tmp/empty", "/tmp/empty-copy")
        assert empty.size == 0 and await target.download("/tmp/empty-copy") == b""


async def test_set_network(network_server: LiveServer, base_image: str) -> None:
    client = AsyncOpenReward(api_key=TOKEN_A, base_url="http://unused.invalid")
    client.session_base_url = network_server.url
    settings = sandbox_settings(base_image, block_network=False, network=CLOSED)
    async with client.sandbox(settings) as box:
        assert (await box.check_run(INTERFACES)).split() == ["lo"]
        await box.set_network(OPENED)
        assert "eth0" in (await box.check_run(INTERFACES)).split()
        await box.set_network(CLOSED)
        assert (await box.check_run(INTERFACES)).split() == ["lo"]


async def test_set_network_needs_a_sandbox_created_with_a_policy(
    network_server: LiveServer, base_image: str
) -> None:
    client = AsyncOpenReward(api_key=TOKEN_A, base_url="http://unused.invalid")
    client.session_base_url = network_server.url
    async with client.sandbox(sandbox_settings(base_image)) as box:
        with pytest.raises(Exception, match="without network="):
            await box.set_network(OPENED)


async def test_a_mapped_image_is_judged_by_what_runs(
    network_server: LiveServer, base_image: str, docker_client: docker.DockerClient
) -> None:
    """The operator maps a registry image onto a local one; the allow-list (orsbox/*)
    then judges the local image, which is what runs."""
    client = AsyncOpenReward(api_key=TOKEN_A, base_url="http://unused.invalid")
    client.session_base_url = network_server.url
    async with client.sandbox(sandbox_settings("python:3.11-slim")) as box:
        [container] = docker_client.api.containers(filters={"label": f"orsbox.session={box.sid}"})
        assert container["Image"] == base_image
        assert await box.check_run("echo ok") == "ok"
