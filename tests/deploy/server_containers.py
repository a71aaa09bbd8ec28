"""What the deployment tests share: the images they need, a bundled episode played with
the ors-sdk client, and the sandbox containers a containerised server started.

A server in a container labels its sandboxes with its own pid namespace
(`orsbox.sandbox.host.owner`), which the host reads as `/proc/<pid>/ns/pid` of the
container's first process: that is how a test finds exactly the sandboxes one
containerised server started, on an engine other runs share."""

from __future__ import annotations

import json
import os
from pathlib import Path

import docker
import httpx
import pytest
from ors.client import ORS

from orsbox.cluster.images import ROUTER_IMAGE, SERVER_IMAGE
from orsbox.sandbox.host import owner as L

ROOT = Path(__file__).resolve().parents[2]
EPISODE = ROOT / "environments" / "terminal" / "examples" / "train-0-correct.jsonl"


DEPLOY_IMAGES = (SERVER_IMAGE, ROUTER_IMAGE)


def require_images(client: docker.DockerClient, *tags: str) -> None:
    """Fail (not skip) when they are missing: scripts/test.sh builds them."""
    missing = [t for t in tags if not client.images.list(name=t)]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: build with `orsbox build --server`")


def play_terminal_episode(url: str, token: str) -> float:
    """The bundled `terminal` environment's train task 0, its known-correct calls replayed
    through the unmodified ors-sdk client; the reward the grader gave."""
    calls = [json.loads(line) for line in EPISODE.read_text().splitlines() if line.strip()]
    with ORS(base_url=url, api_key=token) as ors:
        env = ors.environment("terminal")
        with env.session(task=env.list_tasks(split="train")[0]) as session:
            for call in calls:
                result = session.call_tool(call["name"], call["input"])
    assert result.finished
    return float(result.reward or 0.0)


def open_terminal_session(url: str, token: str, index: int = 0) -> str:
    """A `terminal` session through raw HTTP, created (its sandbox starting); its id."""
    auth = {"X-API-Key": token}
    sid = httpx.post(f"{url}/create_session", headers=auth, timeout=30).json()["sid"]
    body = {"env_name": "terminal", "split": "train", "index": index}
    headers = {**auth, "X-Session-ID": sid}
    created = httpx.post(f"{url}/create", json=body, headers=headers, timeout=120)
    assert created.status_code == 200, created.text
    return sid


def pid_namespace(client: docker.DockerClient, container_id: str) -> str:
    """The pid namespace of a running container's processes, as /proc names it."""
    pid = client.api.inspect_container(container_id)["State"]["Pid"]
    return os.readlink(f"/proc/{pid}/ns/pid")


def sandboxes_of(client: docker.DockerClient, namespace: str) -> list[str]:
    """Ids of the sandbox containers started by the server in pid namespace `namespace`
    (`pid:[N]`, as /proc names it; the label holds its number)."""
    wanted = {"label": [f"{L.ORSBOX}=1", f"{L.PID_NAMESPACE}={L.namespace_value(namespace)}"]}
    return [c["Id"] for c in client.api.containers(all=True, filters=wanted)]


def remove_all(client: docker.DockerClient, container_ids: list[str]) -> None:
    """Force-remove them; one already gone, or being removed by the engine (auto_remove),
    is fine."""
    for container_id in container_ids:
        try:
            client.api.remove_container(container_id, force=True)
        except docker.errors.APIError as e:
            if e.status_code not in (404, 409):
                raise
