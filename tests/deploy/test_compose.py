"""deploy/compose brought up for real with the Compose this machine installs (Debian 12's
docker-compose 1.29; the file is the Compose Specification, so it is also Compose v2's):
three orsbox/server cells on the machine's engine behind the orsbox/router HAProxy,
`ORSBOX_TOKEN` set. Episodes through the router land on every cell; a killed cell's
sessions get the router's 410 while the others finish; `down` leaves no container,
network or volume, and no sandbox of any cell.

One stack per run, under a project name of its own, taken down in a `finally`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker
import httpx
import pytest
import yaml

from orsbox.cluster.router import CELL_GONE
from orsbox.server.cells import cell_of
from tests.deploy.server_containers import (
    DEPLOY_IMAGES,
    ROOT,
    open_terminal_session,
    pid_namespace,
    play_terminal_episode,
    remove_all,
    require_images,
    sandboxes_of,
)
from tests.servers import free_port
from tests.sse_client import post_sse
from tests.waiting import poll_until, wait_until

COMPOSE_FILE = ROOT / "deploy" / "compose" / "compose.yaml"
CELLS = ("cell-1", "cell-2", "cell-3")
TOKEN = "compose-token-0123456789abcdef"
AUTH = {"X-API-Key": TOKEN}
PROJECT_LABEL = "com.docker.compose.project"
UP_TIMEOUT_S = 180
SESSIONS_PER_CELL = 2


def compose_command() -> list[str]:
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is missing (scripts/test.sh installs it from Debian)")
    return ["docker-compose"]


def test_the_compose_file_passes_the_compose_spec_schema(tmp_path: Path) -> None:
    """`docker-compose config` checks a file without `version:` against the Compose
    Specification's schema, the one Compose v2 reads too; a broken copy fails it."""
    env = {**os.environ, "ORSBOX_TOKEN": TOKEN}
    command = [*compose_command(), "-f", str(COMPOSE_FILE), "config", "--quiet"]
    checked = subprocess.run(command, env=env, capture_output=True, cwd=COMPOSE_FILE.parent)
    assert checked.returncode == 0, checked.stderr.decode()
    stack = yaml.safe_load(COMPOSE_FILE.read_text())
    assert "version" not in stack
    stack["services"]["router"]["ports"] = "8080:8080"  # a list in the schema
    broken = tmp_path / "compose.yaml"
    broken.write_text(yaml.safe_dump(stack))
    command[2] = str(broken)
    assert subprocess.run(command, env=env, capture_output=True).returncode != 0


@dataclass
class Stack:
    """One `docker-compose -p <project>` stack of deploy/compose on the machine's engine."""

    project: str
    port: int
    client: docker.DockerClient
    namespaces: list[str] = field(default_factory=list)  # the cells' pid namespaces

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def compose(self, *args: str) -> None:
        env = {**os.environ, "ORSBOX_TOKEN": TOKEN, "ORSBOX_ROUTER_PORT": f"127.0.0.1:{self.port}"}
        command = [*compose_command(), "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        done = subprocess.run(command, env=env, capture_output=True, timeout=UP_TIMEOUT_S)
        assert done.returncode == 0, done.stderr.decode()[-3000:]

    def container(self, service: str) -> str:
        wanted = [f"{PROJECT_LABEL}={self.project}", f"com.docker.compose.service={service}"]
        return self.client.api.containers(all=True, filters={"label": wanted})[0]["Id"]

    def leftovers(self) -> list[str]:
        """Containers, networks and volumes of this project still on the engine."""
        label = {"label": f"{PROJECT_LABEL}={self.project}"}
        containers = [c["Id"] for c in self.client.api.containers(all=True, filters=label)]
        networks = [n["Name"] for n in self.client.api.networks(filters=label)]
        volumes = [v["Name"] for v in self.client.api.volumes(filters=label)["Volumes"] or []]
        return containers + networks + volumes


@pytest.fixture
def stack(docker_client: docker.DockerClient) -> Iterator[Stack]:
    require_images(docker_client, *DEPLOY_IMAGES)
    stack = Stack(f"orsbox-test-{uuid.uuid4().hex[:8]}", free_port(), docker_client)
    try:
        stack.compose("up", "--detach")
        for cell in CELLS:
            wait_until(lambda c=cell: cell_health(stack.url, c), UP_TIMEOUT_S, 0.2, cell)
        stack.namespaces += [pid_namespace(docker_client, stack.container(c)) for c in CELLS]
        yield stack
    finally:
        stack.compose("down", "--volumes", "--remove-orphans", "--timeout", "30")
        for namespace in stack.namespaces:
            remove_all(docker_client, sandboxes_of(docker_client, namespace))


def cell_health(url: str, cell: str) -> bool:
    """The cell answers /health through the router (pinned to it by a probe id)."""
    try:
        answer = httpx.get(f"{url}/health", headers={"X-Session-ID": f"probe.{cell}"}, timeout=5)
    except httpx.HTTPError:
        return False
    return answer.status_code == 200 and answer.json()["cell"] == cell


def bash(url: str, sid: str, command: str) -> str:
    body = {"name": "bash", "input": {"command": command}}
    stream = post_sse(f"{url}/terminal/call", body, sid, **AUTH)
    assert stream.status == 200, stream.raw
    return stream.result()["output"]["blocks"][0]["text"].strip()


def sessions_on_every_cell(url: str) -> dict[str, list[str]]:
    by_cell: dict[str, list[str]] = {}
    for _ in range(len(CELLS) * SESSIONS_PER_CELL * 3):
        sid = open_terminal_session(url, TOKEN, index=1)
        by_cell.setdefault(cell_of(sid) or "", []).append(sid)
        if all(len(by_cell.get(c, [])) >= SESSIONS_PER_CELL for c in CELLS):
            break
    return by_cell


@pytest.mark.docker
@pytest.mark.deploy
def test_compose_cells_share_episodes_lose_only_a_killed_cells_and_come_down_clean(
    stack: Stack, docker_client: docker.DockerClient
) -> None:
    assert play_terminal_episode(stack.url, TOKEN) == 1.0  # ors-sdk, through the router
    by_cell = sessions_on_every_cell(stack.url)
    print(f"\nsessions per cell: { {c: len(s) for c, s in sorted(by_cell.items())} }")
    assert set(by_cell) == set(CELLS), by_cell
    for sids in by_cell.values():
        for sid in sids:
            assert bash(stack.url, sid, f"echo {sid}") == sid

    victim = "cell-2"
    victim_namespace = pid_namespace(docker_client, stack.container(victim))
    assert sandboxes_of(docker_client, victim_namespace)
    docker_client.api.kill(stack.container(victim))
    for sid in by_cell[victim]:
        body = {"name": "bash", "input": {"command": "true"}}
        stream = post_sse(f"{stack.url}/terminal/call", body, sid, **AUTH)
        assert stream.status == 410, stream.raw
        assert json.loads(stream.raw)["detail"] == CELL_GONE
    for cell, sids in by_cell.items():
        if cell != victim:
            for sid in sids:
                assert bash(stack.url, sid, f"echo again {sid}") == f"again {sid}"
                headers = {**AUTH, "X-Session-ID": sid}
                assert httpx.post(f"{stack.url}/delete", headers=headers).status_code == 200
    # the killed cell's sandboxes end by the agent's dead-man's switch
    assert poll_until(lambda: not sandboxes_of(docker_client, victim_namespace), 30)

    stack.compose("down", "--volumes", "--remove-orphans", "--timeout", "30")
    assert stack.leftovers() == []
    assert [s for n in stack.namespaces for s in sandboxes_of(docker_client, n)] == []
