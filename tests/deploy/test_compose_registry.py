"""The registry of deploy/compose, as shipped: `orsbox/registry` (Debian's
docker-registry, built by `orsbox build --server`) brought up by `docker-compose
--profile registry` on a loopback port, filled by `orsbox.cluster.pushing.push` from the
machine's engine (the default backend's image store), and taken down with its volume. (That a cell's engine pulls through
such a registry as a mirror is tests/cluster/test_registry.py.)"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator

import docker
import pytest

from orsbox.cluster.images import REGISTRY_IMAGE
from orsbox.cluster.pushing import push
from orsbox.cluster.registry import answers, catalog
from orsbox.sandbox.config import with_backend
from tests.deploy.server_containers import require_images
from tests.deploy.test_compose import COMPOSE_FILE, PROJECT_LABEL, compose_command
from tests.servers import free_port
from tests.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.deploy]
UP_TIMEOUT_S = 120


class RegistryStack:
    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client
        self.project = f"orsbox-test-reg-{uuid.uuid4().hex[:8]}"
        self.address = f"127.0.0.1:{free_port()}"
        self.volumes: set[str] = set()  # the registry container's, once it is up

    def compose(self, *args: str) -> None:
        env = {**os.environ, "ORSBOX_TOKEN": "unused", "ORSBOX_REGISTRY_PORT": self.address}
        command = [*compose_command(), "-p", self.project, "-f", str(COMPOSE_FILE)]
        done = subprocess.run(
            [*command, "--profile", "registry", *args],
            env=env, capture_output=True, timeout=UP_TIMEOUT_S,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()[-3000:]

    def leftovers(self) -> list[str]:
        label = {"label": f"{PROJECT_LABEL}={self.project}"}
        containers = [c["Id"] for c in self.client.api.containers(all=True, filters=label)]
        volumes = [
            v["Name"]
            for v in self.client.api.volumes()["Volumes"] or []
            if v["Name"] in self.volumes
        ]
        return containers + volumes


@pytest.fixture
def registry_stack(docker_client: docker.DockerClient) -> Iterator[RegistryStack]:
    require_images(docker_client, REGISTRY_IMAGE)
    stack = RegistryStack(docker_client)
    try:
        stack.compose("up", "--detach", "registry")
        label = {"label": f"{PROJECT_LABEL}={stack.project}"}
        (container,) = docker_client.api.containers(filters=label)
        stack.volumes = {
            m["Name"] for m in docker_client.api.inspect_container(container["Id"])["Mounts"]
        }
        yield stack
    finally:
        stack.compose("down", "--volumes", "--timeout", "10")


def test_the_compose_registry_takes_pushed_images_and_comes_down_clean(
    registry_stack: RegistryStack, docker_client: docker.DockerClient, base_image: str
) -> None:
    address = registry_stack.address
    wait_until(lambda: answers(address), UP_TIMEOUT_S, 0.2, f"the registry on {address}")
    lines: list[str] = []
    report = with_backend(
        None, lambda backend: push(backend.images, [base_image], address, lines.append)
    )
    assert not report.failed and report.pushed == [f"{address}/{base_image}"]
    assert any("pushed" in line for line in lines), lines
    assert base_image.rsplit(":", 1)[0] in catalog(address)
    assert len(registry_stack.volumes) == 1  # its storage: a volume, not the container
    registry_stack.compose("down", "--volumes", "--timeout", "10")
    assert registry_stack.leftovers() == []
