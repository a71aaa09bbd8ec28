"""Containers follow their sessions: removed on delete, timeout, shutdown and server
death; a dead container is a terminal error; a missing image is a clear setup error."""

from __future__ import annotations

import signal
import socket
import time

import docker
import httpx

from tests.containers.conftest import labelled, open_episode, start_container_server
from tests.servers import LiveServer
from tests.waiting import wait_until


def test_labels_and_delete(
    container_server: LiveServer, docker_client: docker.DockerClient
) -> None:
    ep = open_episode(container_server)
    assert ep.bash("echo up")[0] == "up\n"
    [container] = labelled(docker_client, **{"orsbox.session": ep.sid})
    labels = container.labels
    assert labels["orsbox.server"] and labels["orsbox.environment"] == "sandboxed"
    attrs = container.attrs["HostConfig"]
    assert attrs["NetworkMode"] == "none" and attrs["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in attrs["SecurityOpt"][0] and attrs["Init"] is True
    assert attrs["PidsLimit"] == 256 and attrs["Memory"] == 256 * 1024**2
    assert ep.bash("id -un")[0] == "orsbox\n"
    # orsbox's own environments keep the hardened default (Harbor tasks do not)
    assert "CapEff:\t0000000000000000" in ep.bash("grep CapEff /proc/self/status")[0]
    ep.delete()
    assert labelled(docker_client, **{"orsbox.session": ep.sid}) == []


def test_docker_kill_is_a_terminal_error(
    container_server: LiveServer, docker_client: docker.DockerClient
) -> None:
    ep = open_episode(container_server)
    try:
        ep.bash("echo up")
        [container] = labelled(docker_client, **{"orsbox.session": ep.sid})
        container.kill()
        for _ in range(2):  # this call and every later one
            stream = ep.call("bash", command="echo hi")
            assert stream.names()[-1] == "error", stream.events
            assert "SandboxGone" in stream.events[-1][1] and "container" in stream.events[-1][1]
        wait_until(
            lambda: not labelled(docker_client, **{"orsbox.session": ep.sid}),
            10,
            interval_s=0.2,
            message="the deleted session's container removed",
        )
    finally:
        ep.delete()


def test_missing_image_is_a_setup_error_naming_it(container_server: LiveServer) -> None:
    ep = open_episode(container_server, env="missingimage")
    r = httpx.get(
        f"{container_server.url}/missingimage/prompt", headers={"X-Session-ID": ep.sid}, timeout=60
    )
    assert r.status_code == 500
    detail = r.json()["detail"]
    assert "orsbox/does-not-exist:latest" in detail and "not found" in detail and "build" in detail
    ep.delete()


def test_inactivity_timeout_removes_the_container(
    tmp_path, base_image: str, docker_client: docker.DockerClient
) -> None:
    server = start_container_server(tmp_path, session_timeout_s=2, reap_interval_s=0.5)
    try:
        ep = open_episode(server)
        ep.bash("echo up")
        assert labelled(docker_client, **{"orsbox.session": ep.sid})
        wait_until(
            lambda: not labelled(docker_client, **{"orsbox.session": ep.sid}),
            10,
            interval_s=0.2,
            message="the session's container removed",
        )
    finally:
        server.stop()


def test_shutdown_removes_every_container(
    tmp_path, base_image: str, docker_client: docker.DockerClient
) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        server = start_container_server(tmp_path)
        mine = {"orsbox.server": server.server_id}
        episodes = [open_episode(server) for _ in range(3)]
        for ep in episodes:
            ep.bash("sleep 1000 &")
        assert len(labelled(docker_client, **mine)) == 3
        server.stop(sig)
        assert labelled(docker_client, **mine) == []


def test_sigkill_leaves_nothing_and_a_new_server_sweeps(
    tmp_path, base_image: str, docker_client: docker.DockerClient
) -> None:
    server = start_container_server(tmp_path)
    mine = {"orsbox.server": server.server_id}
    for _ in range(2):
        open_episode(server).bash("echo up")
    assert len(labelled(docker_client, **mine)) == 2
    killed_at = time.monotonic()
    server.stop(signal.SIGKILL)
    wait_until(
        lambda: not labelled(docker_client, **mine),
        30,
        interval_s=0.2,
        message="the killed server's containers swept",
    )
    assert time.monotonic() - killed_at < 30

    # leftovers the dead-man's switch could not remove (say, a container whose guest
    # never attached) are swept by the next server that starts
    dead = {"orsbox.server": f"test-dead-{time.monotonic_ns()}"}
    docker_client.containers.run(
        base_image,
        ["sleep", "infinity"],
        detach=True,
        labels={
            "orsbox": "1",
            **dead,
            "orsbox.session": "x",
            "orsbox.host": socket.gethostname(),
            "orsbox.pid": str(2**22 + 17),  # above pid_max: certainly not running
            "orsbox.pid_start": "1",
        },
    )
    assert labelled(docker_client, **dead)
    server = start_container_server(tmp_path)
    try:
        wait_until(
            lambda: not labelled(docker_client, **dead),
            10,
            interval_s=0.2,
            message="the dead server's containers swept",
        )
    finally:
        server.stop()
