"""The server killed outright (SIGKILL) with sessions mid-call: clients see the
connection drop at once, every container goes, and the next server is healthy, sweeps
what the dead one left and serves new sessions.

A plain SIGKILL with idle sessions and `docker kill` of a session's container are tested
in tests/containers/test_container_lifecycle.py (see tests/adversarial/__init__.py)."""

from __future__ import annotations

import signal
import socket
import threading
import time

import docker
import httpx
import pytest

from orsbox.sandbox.host import owner as L
from tests.adversarial.conftest import HOSTILE_ENVS
from tests.containers.conftest import labelled, open_episode, start_container_server
from tests.waiting import wait_until

pytestmark = pytest.mark.docker


def all_running(client: docker.DockerClient, labels: dict, command: str, count: int) -> bool:
    """`count` containers with these labels, each running `command` (the calls are in)."""
    containers = labelled(client, **labels)
    tops = [str(container.top()["Processes"]) for container in containers]
    return len(tops) == count and all(command in top for top in tops)


def test_sigkill_mid_call_then_a_new_server_sweeps_and_serves(
    tmp_path, base_image: str, docker_client: docker.DockerClient
) -> None:
    server = start_container_server(tmp_path, HOSTILE_ENVS)
    mine = {"orsbox.server": server.server_id}
    episodes = [open_episode(server, "hostile") for _ in range(3)]
    outcomes: list[str] = []

    def long_call(ep) -> None:
        try:
            ep.call("bash", command="sleep 100", timeout=60)
            outcomes.append("answered")
        except httpx.HTTPError as e:
            outcomes.append(type(e).__name__)

    for ep in episodes:
        ep.bash("echo up")
    calls = [threading.Thread(target=long_call, args=(ep,)) for ep in episodes]
    for thread in calls:
        thread.start()
    wait_until(lambda: all_running(docker_client, mine, "sleep 100", 3), 30, interval_s=0.2)
    owner = labelled(docker_client, **mine)[0].labels  # the dead server's identity
    killed_at = time.monotonic()
    server.stop(signal.SIGKILL)
    for thread in calls:
        thread.join(timeout=10)
    assert len(outcomes) == 3 and "answered" not in outcomes, outcomes  # dropped, at once
    wait_until(
        lambda: not labelled(docker_client, **mine),
        30,
        interval_s=0.2,
        message="containers removed",
    )
    assert time.monotonic() - killed_at < 30

    # what a dead server's switch could not remove (say, a container created, never started)
    leftover = docker_client.containers.run(
        base_image, ["sleep", "infinity"], detach=True, labels={**owner, L.SESSION: "x"}
    )
    assert L.owner_is_dead(leftover.labels) and owner[L.HOST] == socket.gethostname()
    again = start_container_server(tmp_path, HOSTILE_ENVS)
    try:
        assert httpx.get(f"{again.url}/health").json()["status"] == "ok"
        wait_until(
            lambda: not labelled(docker_client, **mine),
            10,
            interval_s=0.2,
            message="leftover swept",
        )
        ep = open_episode(again, "hostile")
        assert ep.bash("echo fresh")[0] == "fresh\n"
        ep.delete()
    finally:
        again.stop()
