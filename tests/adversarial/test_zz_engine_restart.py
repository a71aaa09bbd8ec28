"""The Docker engine stops (SIGTERM to dockerd) and comes back while sessions are live.

Without live-restore the engine's containers die with it, so: a call in flight and
later calls of those sessions end with a terminal error saying the sandbox is gone (no
hang); /health reports degraded; a session created meanwhile fails its setup naming
the engine; once the engine is back /health is ok, new sessions work, and nothing is
left behind. Disruptive: it stops the engine every other test uses, so it runs last
(see conftest.py); the outage lasts a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import docker
import httpx
import pytest

from tests.adversarial.conftest import HOSTILE_ENVS
from tests.containers.conftest import labelled, open_episode, start_container_server
from tests.sse_client import Stream
from tests.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.disruptive, pytest.mark.serial]

ENGINE_STOP_S = 60.0
ENGINE_START_S = 90.0
ENGINE_LOG = Path(os.environ.get("DOCKERD_LOG", "/tmp/orsbox-dockerd.log"))
# dockerd writes its pid here unless told otherwise; private engines (gVisor's, a
# cluster's cells) have pid files of their own, so this one is the default socket's engine
ENGINE_PIDFILE = Path("/var/run/docker.pid")
PIDFILES = [ENGINE_PIDFILE, Path("/tmp/orsbox-dockerd.pid"), Path("/tmp/dockerd.pid")]


def until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    wait_until(predicate, timeout, interval_s=0.2, message=what)


def engine_answers() -> bool:
    try:
        client = docker.from_env(timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except docker.errors.DockerException:
        return False


def engine_pid() -> int | None:
    """The default engine's pid from its pid file (never by process name: other engines
    may run on this machine), or None when it is not running."""
    try:
        pid = int(ENGINE_PIDFILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None


def stop_engine() -> list[str]:
    """SIGTERM the default socket's dockerd; return its command line to start it again."""
    pid = engine_pid()
    assert pid is not None, f"no running engine in {ENGINE_PIDFILE}"
    command = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    os.kill(pid, signal.SIGTERM)
    until(lambda: not Path(f"/proc/{pid}").exists(), ENGINE_STOP_S, "dockerd exits")
    return [part.decode() for part in command]


def dockerd_running() -> bool:
    return engine_pid() is not None


def start_engine(command: list[str]) -> None:
    with ENGINE_LOG.open("ab") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    for pidfile in PIDFILES[1:]:  # scripts/start-docker.sh (or whoever) wrote one
        if pidfile.exists():
            pidfile.write_text(f"{process.pid}\n")
    until(engine_answers, ENGINE_START_S, "the engine answers again")


def sleeping_in(client: docker.DockerClient, labels: dict[str, str]) -> bool:
    """Whether the call in flight (`sleep 120`) runs in one of these containers."""
    for container in labelled(client, **labels):
        try:
            processes = container.top().get("Processes") or []
        except docker.errors.APIError:  # not running (yet, or any more)
            continue
        if any("sleep 120" in " ".join(row) for row in processes):
            return True
    return False


def health(url: str) -> dict:
    return httpx.get(f"{url}/health", timeout=10).json()


def test_the_engine_stops_and_comes_back_mid_episode(
    tmp_path: Path, base_image: str, docker_client: docker.DockerClient
) -> None:
    server = start_container_server(tmp_path, HOSTILE_ENVS, setup_wait_s=30)
    mine = {"orsbox.server": server.server_id}
    command: list[str] | None = None
    try:
        live = [open_episode(server, "hostile") for _ in range(2)]
        for ep in live:
            assert ep.bash("echo up")[0] == "up\n"
        in_flight: list[Stream] = []
        caller = threading.Thread(
            target=lambda: in_flight.append(live[0].call("bash", command="sleep 120"))
        )
        caller.start()
        until(lambda: sleeping_in(docker_client, mine), 30, "the call in flight runs")

        stopped_at = time.monotonic()
        command = stop_engine()
        caller.join(timeout=30)
        assert in_flight, "the call in flight did not end"
        assert in_flight[0].names()[-1] == "error" and "is gone" in in_flight[0].events[-1][1]
        started = time.monotonic()
        later = live[1].call("bash", command="echo hi")
        assert later.names()[-1] == "error" and "is gone" in later.events[-1][1]
        assert time.monotonic() - started < 15
        until(lambda: health(server.url)["status"] == "degraded", 15, "/health degraded")
        assert "docker" in health(server.url)["sandbox"]
        newcomer = open_episode(server, "hostile")
        prompt = httpx.get(
            f"{server.url}/hostile/prompt", headers={"X-Session-ID": newcomer.sid}, timeout=60
        )
        assert prompt.status_code == 500 and "docker engine unreachable" in prompt.text
        outage_s = time.monotonic() - stopped_at

        start_engine(command)
        command = None
        until(lambda: health(server.url)["status"] == "ok", 15, "/health ok again")
        fresh = open_episode(server, "hostile")
        assert fresh.bash("echo back")[0] == "back\n"
        again = live[1].call("bash", command="echo hi")  # the lost sandbox stays lost
        assert again.names()[-1] == "error" and "is gone" in again.events[-1][1]
        for ep in [*live, newcomer, fresh]:
            ep.delete()
        until(lambda: not labelled(docker_client, **mine), 30, "no container left")
        assert "internal error" not in server.log()
        print(f"engine outage: {outage_s:.1f}s")
    finally:
        if command is not None and not engine_answers() and not dockerd_running():
            start_engine(command)  # whatever failed, give the engine back
        server.stop()
    assert not labelled(docker_client, **mine)
