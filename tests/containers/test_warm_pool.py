"""Sessions on a server with a warm pool, and a burst of creates, end to end."""

from __future__ import annotations

import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

import docker
import httpx

from tests.containers.conftest import (
    Episode,
    idle,
    labelled,
    open_episode,
    start_container_server,
)
from tests.servers import ROOT
from tests.waiting import wait_until


def test_a_session_from_the_warm_pool_works_end_to_end(
    tmp_path, base_image: str, docker_client: docker.DockerClient
) -> None:
    server = start_container_server(tmp_path, warm_pool=1, setup_wait_s=120)
    mine = {"orsbox.server": server.server_id}
    pooled = {**mine, "orsbox.session": "pool"}
    try:
        # one per served spec (Sandboxed, OnlyBash); MissingImage's image does not exist
        wait_until(
            lambda: len(labelled(docker_client, **pooled)) == 2,
            60,
            interval_s=0.2,
            message="two pooled containers",
        )
        before = {c.id for c in labelled(docker_client, **pooled)}
        ep = open_episode(server)
        ep.ok("write_file", path="/workspace/out.txt", content="hello")
        assert ep.text("submit") == "pass"
        assert ep.bash("id -un")[0] == "orsbox\n"
        # the episode runs in a container from the pool (no container carries its
        # session id), and a third pooled container refilled the pool
        assert labelled(docker_client, **{"orsbox.session": ep.sid}) == []
        wait_until(
            lambda: len(labelled(docker_client, **pooled)) == 3,
            60,
            interval_s=0.2,
            message="three pooled containers",
        )
        assert before < {c.id for c in labelled(docker_client, **pooled)}
        ep.delete()
        wait_until(
            lambda: len(labelled(docker_client, **pooled)) == 2,
            30,
            interval_s=0.2,
            message="two pooled containers again",
        )
        assert len(labelled(docker_client, **mine)) == 2
    finally:
        server.stop()
    assert labelled(docker_client, **mine) == []


def test_a_burst_of_creates_all_succeed(
    tmp_path, base_image: str, docker_client: docker.DockerClient
) -> None:
    server = start_container_server(tmp_path, sandbox_start_concurrency=2, setup_wait_s=120)
    sids = [uuid.uuid4().hex for _ in range(16)]

    def create(sid: str) -> int:
        body = {"env_name": "onlybash", "task_spec": {}}
        r = httpx.post(f"{server.url}/create", headers={"X-Session-ID": sid}, json=body, timeout=30)
        return r.status_code

    try:
        with ThreadPoolExecutor(len(sids)) as pool:
            assert list(pool.map(create, sids)) == [200] * len(sids)
            assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
            episodes = [Episode(server, sid, "onlybash") for sid in sids]
            outputs = list(pool.map(lambda ep: ep.bash(f"echo {ep.sid}")[0], episodes))
        assert outputs == [f"{sid}\n" for sid in sids]
        assert len(labelled(docker_client, **{"orsbox.server": server.server_id})) == len(sids)
        for ep in episodes:
            ep.delete()
    finally:
        server.stop()


def test_a_warm_request_fills_the_pool_ahead_of_a_burst(
    tmp_path, base_image: str, docker_client: docker.DockerClient
) -> None:
    server = start_container_server(tmp_path, setup_wait_s=120)  # warm_pool = 0
    pooled = {"orsbox.server": server.server_id, "orsbox.session": "pool"}
    try:
        body = {"env_name": "onlybash", "count": 3}
        answer = httpx.post(f"{server.url}/orsbox/warm", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["target"] == 3
        wait_until(lambda: idle(server.url, body) == 3, 60, 0.2, "three ready")
        assert len(labelled(docker_client, **pooled)) == 3
        episodes = [open_episode(server, "onlybash") for _ in range(2)]
        for ep in episodes:
            assert ep.bash("echo hi")[0] == "hi\n"
            assert labelled(docker_client, **{"orsbox.session": ep.sid}) == []
            ep.delete()
        unknown = httpx.post(f"{server.url}/orsbox/warm", json={**body, "env_name": "nope"})
        assert unknown.status_code == 404 and "detail" in unknown.json()
        argv = [sys.executable, "-m", "orsbox.cli.main", "warm", "onlybash", "0"]
        done = subprocess.run(
            [*argv, "--url", server.url], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and "keeping 0 idle" in done.stdout, done.stdout + done.stderr
        wait_until(lambda: labelled(docker_client, **pooled) == [], 30, 0.2, "pool emptied")
    finally:
        server.stop()
    assert labelled(docker_client, **{"orsbox.server": server.server_id}) == []
