"""The adversarial suite: hostile agents, hostile clients and faults, against a real
server and a real Docker engine. `tests/adversarial/__init__.py` lists every item and
the test that covers it (some live elsewhere, where they were first written).

Tests marked `disruptive` stop the Docker engine itself; they run after everything else
in the session, so no other test's containers are in the way, and only when
ORSBOX_DISRUPTIVE_TESTS=1 (scripts/test.sh, hence CI, sets it): on a machine where
others share the engine, a plain `pytest` must not stop it under them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import docker
import pytest

from tests.containers.conftest import Episode, labelled, open_episode, start_container_server
from tests.servers import LiveServer

HOSTILE_ENVS = ["tests/adversarial/envs.py:Hostile", "tests/adversarial/envs.py:Seeded"]


DISRUPTIVE_ENV = "ORSBOX_DISRUPTIVE_TESTS"  # scripts/test.sh (CI) sets it to 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("disruptive") is not None)
    if os.environ.get(DISRUPTIVE_ENV) == "1":
        return
    skip = pytest.mark.skip(reason=f"stops the Docker engine; set {DISRUPTIVE_ENV}=1 to run")
    for item in items:
        if item.get_closest_marker("disruptive") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def hostile_server(
    tmp_path_factory: pytest.TempPathFactory, base_image: str, docker_client: docker.DockerClient
) -> Iterator[LiveServer]:
    server = start_container_server(
        tmp_path_factory.mktemp("hostile"), HOSTILE_ENVS, setup_wait_s=60
    )
    yield server
    server.stop()
    assert not labelled(docker_client, **{"orsbox.server": server.server_id})


@pytest.fixture
def hostile(hostile_server: LiveServer) -> Iterator[Episode]:
    """An episode of the `hostile` environment (small limits, bounded disk)."""
    ep = open_episode(hostile_server, "hostile")
    yield ep
    ep.delete()
