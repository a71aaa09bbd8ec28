"""Sandboxes never outlive their server, and a crowd of clients leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import docker
import pytest
from openreward import AsyncOpenReward
from openreward.api.errors import SessionTerminatedError

from tests.sandbox_api.conftest import TOKEN_A, TOKEN_B, api_server_settings, sandbox_settings
from tests.sandbox_api.test_policy import post
from tests.servers import LiveServer, start_server
from tests.waiting import poll_until

pytestmark = pytest.mark.anyio
GONE_WITHIN_S = 60.0


def sandboxes_of(docker_client: docker.DockerClient, server: LiveServer) -> list[dict]:
    labels = ["orsbox.sandbox_api=1", f"orsbox.pid={server.process.pid}"]
    return docker_client.api.containers(all=True, filters={"label": labels})


def wait_until_none(docker_client: docker.DockerClient, server: LiveServer) -> list[dict]:
    """The server's sandboxes still there once they are all gone or time is up."""
    poll_until(lambda: not sandboxes_of(docker_client, server), GONE_WITHIN_S, interval_s=0.2)
    return sandboxes_of(docker_client, server)


async def test_killing_the_server_leaves_no_sandbox(
    tmp_path: Path, base_image: str, docker_client: docker.DockerClient
) -> None:
    server = start_server(
        ["tests/fixture_envs/protocol_envs.py:Protocol"], tmp_path, **api_server_settings()
    )
    client = AsyncOpenReward(api_key=TOKEN_A, base_url="http://unused.invalid")
    client.session_base_url = server.url
    boxes = [client.sandbox(sandbox_settings(base_image)) for _ in range(2)]
    try:
        for box in boxes:
            await box.start()
        await boxes[0].run("sleep 600 &")  # a busy one too
        assert len(sandboxes_of(docker_client, server)) == 2
        server.stop(signal.SIGKILL)
        assert wait_until_none(docker_client, server) == []  # the dead-man's switch
    finally:
        server.stop(signal.SIGKILL)
        for box in boxes:
            box._own_client and await box._own_client.close()  # no server to tell


@pytest.mark.parametrize(
    "per_client", [4, pytest.param(10, marks=pytest.mark.full_matrix)], ids=["ci", "hundred"]
)
async def test_sandboxes_from_ten_clients_leave_nothing(
    tmp_path: Path, base_image: str, docker_client: docker.DockerClient, per_client: int
) -> None:
    """Ten clients, each opening `per_client` sandboxes in turn (at most two at once per
    client): 40 in CI, the full hundred under `-m full_matrix`."""
    tokens = [f"load-client-{i:02d}-token" for i in range(10)]
    settings = api_server_settings(sandbox_tokens=json.dumps(tokens), sandbox_max_per_client=2)
    server = start_server(["tests/fixture_envs/protocol_envs.py:Protocol"], tmp_path, **settings)
    outputs: list[str] = []

    async def one_client(token: str) -> None:
        client = AsyncOpenReward(api_key=token, base_url="http://unused.invalid")
        client.session_base_url = server.url
        for i in range(per_client):
            async with client.sandbox(sandbox_settings(base_image, machine_size="0.5:0.5")) as box:
                outputs.append((await box.run(f"echo {token[-8:]}-{i}")).output)

    try:
        started = time.monotonic()
        await asyncio.gather(*(one_client(t) for t in tokens))
        print(f"{10 * per_client} sandboxes, 10 clients: {time.monotonic() - started:.1f}s")
        assert len(set(outputs)) == 10 * per_client
        assert wait_until_none(docker_client, server) == []
    finally:
        server.stop()


def test_an_idle_sandbox_is_reaped(
    tmp_path: Path, base_image: str, docker_client: docker.DockerClient
) -> None:
    settings = api_server_settings(sandbox_timeout_s=1)
    server = start_server(["tests/fixture_envs/protocol_envs.py:Protocol"], tmp_path, **settings)
    try:
        body = sandbox_settings(base_image).model_dump()
        status, stream = post(server.url, "/create_sandbox", body, TOKEN_A)  # and no pings
        assert status == 200 and "event: end" in stream
        sid = stream.split("data: ", 1)[1].split()[0]
        assert wait_until_none(docker_client, server) == []
        status, answer = post(server.url, "/run", {"cmd": "true"}, TOKEN_A, sid)
        assert status == 410 and "no request for 1s" in answer
    finally:
        server.stop()


async def test_a_sandbox_killed_under_its_client_is_410(
    api_server: LiveServer, base_image: str, docker_client: docker.DockerClient
) -> None:
    client = AsyncOpenReward(api_key=TOKEN_A, base_url="http://unused.invalid")
    client.session_base_url = api_server.url
    async with client.sandbox(sandbox_settings(base_image)) as box:
        [container] = docker_client.api.containers(filters={"label": f"orsbox.session={box.sid}"})
        docker_client.api.kill(container["Id"])
        with pytest.raises(SessionTerminatedError, match="410"):
            await box.run("true")
        status, answer = post(api_server.url, "/ping", {}, TOKEN_A, box.sid)
        assert status == 410 and "gone" in answer
        # to another client, the same 404 as an id that never existed (issue 48)
        unknown = box.sid[:-12] + "0" * 12
        theirs = post(api_server.url, "/ping", {}, TOKEN_B, box.sid)
        never = post(api_server.url, "/ping", {}, TOKEN_B, unknown)
        assert theirs == (404, never[1].replace(unknown, box.sid))
