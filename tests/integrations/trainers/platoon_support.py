"""What the platoon tests share: two real servers started at once, and the check that
a group left nothing running on them (docs/train-with-platoon.md)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import docker
import httpx
import pytest

from tests.servers import LiveServer, start_server
from tests.waiting import wait_until

SUMS = "tests/integrations/trainers/platoon_envs.py:Sums"
PID_LABEL = "orsbox.pid"  # the label naming the server process that owns a container


@contextmanager
def servers_of(
    targets: list[list[str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[LiveServer]]:
    """One server per list of targets, started at once, stopped at the end."""
    with ThreadPoolExecutor(len(targets)) as pool:
        starting = [
            pool.submit(start_server, t, tmp_path_factory.mktemp("platoon")) for t in targets
        ]
    started = [f.result() for f in starting if f.exception() is None]
    try:
        for f in starting:
            f.result()  # a server that did not start fails the tests, the others stopped
        yield started
    finally:
        for server in started:
            server.stop()


def assert_nothing_left(servers: list[LiveServer], docker_client: docker.DockerClient) -> None:
    """No session open on the servers, and every rollout's container removed."""
    for server in servers:
        assert httpx.get(f"{server.url}/health").json()["sessions"] == 0

    def containers() -> list[object]:
        return [
            c
            for s in servers
            for c in docker_client.api.containers(
                all=True, filters={"label": f"{PID_LABEL}={s.process.pid}"}
            )
        ]

    wait_until(
        lambda: not containers(),
        60,
        interval_s=0.2,
        message="every rollout's container removed after the sessions closed",
    )
