"""A trainer that exits without deleting its sessions leaves nothing running for long,
and one that is merely slow keeps them: real `openreward` clients in processes of their
own hold sessions of the bundled `coding` environment (a container each, from orsbox/base) and never call
a tool. One is killed; its session and container go a lease after its last ping, while
the other's, pinging on, stays. The status page and the metrics show both as idle,
with their age, while they wait."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from orsbox.sandbox.host import owner as L
from tests.servers import LiveServer, start_server
from tests.waiting import wait_until

pytestmark = pytest.mark.docker

LEASE_S = 12.0  # longer than the clients' 10 s between pings: a live client keeps it

HOLDER = """
import os, sys, threading
from openreward import OpenReward

client = OpenReward(api_key="k")
env = client.environments.get("coding")
held = env.session(split="train", index=0)
session = held.__enter__()
session.get_prompt()
print("holding", session.sid, flush=True)
threading.Event().wait()  # a model thinking, for ever; the client's pings go on
"""


@pytest.fixture
def server(tmp_path: Path, base_image: str) -> Iterator[LiveServer]:
    live = start_server(["coding"], tmp_path, session_lease_s=LEASE_S, reap_interval_s=0.25)
    yield live
    live.stop()


def _hold(server: LiveServer, tmp_path: Path, name: str) -> tuple[subprocess.Popen[str], str]:
    script = tmp_path / f"{name}.py"
    script.write_text(HOLDER)
    env = {**os.environ, "OPENREWARD_SESSION_URL": server.url}
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    line = process.stdout.readline() if process.stdout else ""  # the client's own signal
    assert line.startswith("holding "), line
    return process, line.split()[1]


def _containers(client: docker.DockerClient, sid: str) -> list[str]:
    found = client.api.containers(filters={"label": f"{L.SESSION}={sid}"})
    return [c["Id"] for c in found]


def _metric(server: LiveServer, name: str, **labels: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return sample.value
    return 0.0


def test_a_killed_trainers_session_goes_a_slow_ones_stays(
    server: LiveServer, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    slow, slow_sid = _hold(server, tmp_path, "slow")
    gone, gone_sid = _hold(server, tmp_path, "gone")
    try:
        assert _containers(docker_client, slow_sid) and _containers(docker_client, gone_sid)
        assert _metric(server, "orsbox_sessions_idle", environment="coding") == 2
        page = httpx.get(f"{server.url}/ui/live").text
        assert page.count('class="n idle"') == 2
        gone.send_signal(signal.SIGKILL)  # no /delete, no more pings
        gone.wait()
        wait_until(
            lambda: not _containers(docker_client, gone_sid),
            LEASE_S + 30,
            interval_s=0.25,
            message="the killed client's container removed",
        )
        reaped = _metric(server, "orsbox_sessions_reaped_total", reason="lease")
        assert reaped == 1
        # the slow one outlived a whole lease with no call: its client's pings held it
        assert _containers(docker_client, slow_sid)
        assert httpx.get(f"{server.url}/health").json()["sessions"] == 1
        assert _metric(server, "orsbox_sessions_idle_oldest_seconds", environment="coding") > (
            LEASE_S
        )
    finally:  # the server's shutdown removes the slow one's container (the fixture)
        for process in (slow, gone):
            process.kill()
            process.wait()
