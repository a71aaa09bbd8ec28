"""A real server hosting container environments, and helpers to drive its sessions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from tests.servers import LiveServer, start_server
from tests.sse_client import Stream, post_sse

CONTAINER_ENVS = [
    "tests/fixture_envs/container_envs.py:Sandboxed",
    "tests/fixture_envs/container_envs.py:OnlyBash",
    "tests/fixture_envs/container_envs.py:MissingImage",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/containers" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


TEST_SERVER_PREFIX = "test-"


def labelled(client: docker.DockerClient, **labels: str) -> list[Any]:
    """orsbox containers with these labels (other test runs may share the engine, so
    callers name their server or session)."""
    filters = ["orsbox=1", *(f"{k}={v}" for k, v in labels.items())]
    while True:
        try:
            return client.containers.list(all=True, filters={"label": filters})
        except docker.errors.NotFound:  # one was removed between listing and inspecting
            continue


@dataclass
class Episode:
    server: LiveServer
    sid: str
    env: str = "sandboxed"

    def call(self, name: str, **tool_input: Any) -> Stream:
        url = f"{self.server.url}/{self.env}/call"
        return post_sse(url, {"name": name, "input": tool_input}, self.sid, timeout=180)

    def ok(self, name: str, **tool_input: Any) -> dict[str, Any]:
        result = self.call(name, **tool_input).result()
        assert result["ok"] is True, result
        return result["output"]

    def text(self, name: str, **tool_input: Any) -> str:
        return self.ok(name, **tool_input)["blocks"][0]["text"]

    def bash(self, command: str, **kw: Any) -> tuple[str, dict[str, Any]]:
        out = self.ok("bash", command=command, **kw)
        return out["blocks"][0]["text"], out["metadata"]

    def delete(self) -> None:
        httpx.post(f"{self.server.url}/delete", headers={"X-Session-ID": self.sid}, timeout=60)


def open_episode(server: LiveServer, env: str = "sandboxed", **task: Any) -> Episode:
    sid = uuid.uuid4().hex
    body = {"env_name": env, "task_spec": {"expected": "hello", **task}}
    r = httpx.post(f"{server.url}/create", headers={"X-Session-ID": sid}, json=body, timeout=30)
    assert r.status_code == 200, r.text
    return Episode(server, sid, env)


def start_container_server(
    tmp_path: Path, targets: list[str] | None = None, **settings: Any
) -> LiveServer:
    """A server with a known id, so its containers can be told from any others."""
    server_id = f"{TEST_SERVER_PREFIX}{uuid.uuid4().hex[:12]}"
    server = start_server(targets or CONTAINER_ENVS, tmp_path, server_id=server_id, **settings)
    server.server_id = server_id
    return server


@pytest.fixture(scope="module")
def container_server(
    tmp_path_factory: pytest.TempPathFactory, base_image: str, docker_client: docker.DockerClient
) -> Iterator[LiveServer]:
    server = start_container_server(tmp_path_factory.mktemp("containers"), setup_wait_s=60)
    yield server
    server.stop()
    assert not labelled(docker_client, **{"orsbox.server": server.server_id}), (
        "shutdown left containers"
    )


@pytest.fixture
def episode(container_server: LiveServer) -> Iterator[Episode]:
    ep = open_episode(container_server)
    yield ep
    ep.delete()


def idle(url: str, warm: dict) -> int:
    """Idle sandboxes ready now, as the (idempotent) warm request answers."""
    return httpx.post(f"{url}/orsbox/warm", json=warm, timeout=60).json()["idle"]
