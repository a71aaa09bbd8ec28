"""A missing instance image is pulled into the engine the backend is configured with,
not into DOCKER_HOST or the default socket (issue 24, item 2). Two real engines: the
main one (the default socket, where the test images are built) and the private one of
scripts/start-runsc-engine.sh, configured as the backend's engine; the image comes from
a registry the test serves on loopback (tests/registry.py)."""

from __future__ import annotations

import contextlib
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from orsbox.authoring.environment import EnvironmentContext
from orsbox.errors import SetupFailed
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.config import DockerConfig
from orsbox.sandbox.docker.images import image_exists
from tests.formats.swebench import dataset, images
from tests.formats.swebench.conftest import Episode, load_one
from tests.registry import local_registry
from tests.runtimes import runsc_engine, runtime_available

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.fixture
def other_engine(base_image: str) -> Iterator[docker.DockerClient]:
    runtime_available("runsc")  # its engine: fails rather than skips in CI
    client = docker.DockerClient(base_url=runsc_engine(), timeout=120)
    yield client
    client.close()


@pytest.fixture
def registered(
    tmp_path: Path, test_images: list[str], docker_client: docker.DockerClient
) -> Iterator[str]:
    """An instance image on the loopback registry only: pushed from the main engine,
    whose tag of it is then removed."""
    with local_registry(tmp_path) as registry:
        name = f"{registry}/orsbox-test/pull-{secrets.token_hex(4)}:1"
        docker_client.images.get(images.CALC).tag(name)
        try:
            for event in docker_client.api.push(name, stream=True, decode=True):
                assert "error" not in event, event
        finally:
            docker_client.images.remove(name)
        yield name


async def test_a_missing_instance_image_is_pulled_into_the_configured_engine(
    tmp_path: Path,
    registered: str,
    other_engine: docker.DockerClient,
    docker_client: docker.DockerClient,
) -> None:
    assert not image_exists(other_engine, registered) and not image_exists(
        docker_client, registered
    )
    env_cls = load_one(dataset.write_jsonl(tmp_path / "t.jsonl", [dataset.v5_row(registered)]))
    backend = DockerBackend(config=DockerConfig(engine=runsc_engine()))
    env = env_cls({"instance_id": "calc__calc-5"})
    env.orsbox_context = EnvironmentContext(uuid.uuid4().hex[:12], sandbox_backend=backend)
    try:
        await env.setup()
        try:
            listing = await Episode(env).bash("cd /testbed && git status --short && ls calc")
        finally:
            await env.teardown()
        assert "ops.py" in listing, listing
        assert image_exists(other_engine, registered), "not pulled into the configured engine"
        assert not image_exists(docker_client, registered), "pulled into the default engine"
    finally:
        await backend.close()
        for client in (other_engine, docker_client):  # the default one: if pulled there
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(registered, force=True)


async def test_an_image_no_registry_holds_fails_setup_naming_the_configured_engine_pull(
    tmp_path: Path, test_images: list[str], other_engine: docker.DockerClient
) -> None:
    """The registry answers but has no such image: setup says so, and what to do."""
    with local_registry(tmp_path) as registry:
        image = f"{registry}/orsbox-test/never-pushed:1"
        env_cls = load_one(dataset.write_jsonl(tmp_path / "t.jsonl", [dataset.v5_row(image)]))
        backend = DockerBackend(config=DockerConfig(engine=runsc_engine()))
        env = env_cls({"instance_id": "calc__calc-5"})
        env.orsbox_context = EnvironmentContext(uuid.uuid4().hex[:12], sandbox_backend=backend)
        try:
            with pytest.raises(SetupFailed) as caught:
                await env.setup()
        finally:
            await env.teardown()
            await backend.close()
    message = str(caught.value)
    assert f"image {image} is not on this machine and could not be pulled" in message
    assert "not found" in message or "unknown" in message, message
    assert f"--image-map {image}=LOCAL" in message
