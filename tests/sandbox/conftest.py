"""Fixtures for the Docker sandbox tests: the base image, a backend, a sandbox, and a
check after every test that no orsbox container was left behind."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator

import docker
import pytest

from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import BASE_IMAGE, DockerBackend, DockerSandbox, ensure_base_image

LEFTOVER_WAIT_S = 10.0


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except docker.errors.DockerException as e:
        pytest.skip(f"no Docker engine: {e}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient) -> str:
    ensure_base_image(docker_client)
    return BASE_IMAGE


@pytest.fixture(autouse=True)
def no_leftover_containers(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("docker") is None:
        yield
        return
    docker_client = request.getfixturevalue("docker_client")
    # Only this process's containers: other test runs may share the engine.
    mine = ["orsbox=1", f"orsbox.pid={os.getpid()}"]
    yield
    deadline = time.monotonic() + LEFTOVER_WAIT_S
    while True:
        left = docker_client.containers.list(all=True, filters={"label": mine})
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for container in left:
        container.remove(force=True)
    assert not left, f"containers left behind: {[c.name for c in left]}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def backend(base_image: str) -> AsyncIterator[DockerBackend]:
    backend = DockerBackend()
    yield backend
    await backend.close()


@pytest.fixture
async def sandbox(backend: DockerBackend, base_image: str) -> DockerSandbox:
    return await backend.start(SandboxSpec(image=base_image, session_id="test"))
