"""Setup snapshots and forks, on a real server and engine.

One manifest environment (named per run: other runs share the engine) whose setup
installs a Debian package built from a copied-in folder, records the task's field, and
stamps the time: an episode started from the saved state shows the first episode's
stamp, one that ran the setup shows its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import httpx
import pytest

from tests.containers.conftest import Episode, idle, labelled, start_container_server
from tests.servers import ROOT, LiveServer
from tests.sse_client import post_sse
from tests.waiting import wait_until

SETUP = """set -e
test "$ORSBOX_TASK_NAME" != fail || { echo told to fail; exit 3; }
mkdir -p /tmp/deb/DEBIAN /tmp/deb/usr/share/demo
cp /tmp/pkg/control /tmp/deb/DEBIAN/control
cp /tmp/pkg/data.txt /tmp/deb/usr/share/demo/
dpkg-deb --build /tmp/deb /tmp/demo.deb >/dev/null
dpkg -i /tmp/demo.deb >/dev/null
rm -rf /tmp/deb /tmp/demo.deb
mkdir -p /opt/state
echo "$ORSBOX_TASK_NAME" > /opt/state/task.txt
date +%s%N > /opt/state/stamp
"""

STATE = (
    "dpkg-query -W -f='${Package} ${Version} ${Status}\\n' orsbox-demo; "
    "cat /usr/share/demo/data.txt /opt/state/task.txt; "
    "find /workspace /tmp /opt/state /usr/share/demo | sort"
)


def write_environment(folder: Path, name: str) -> Path:
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "control").write_text(
        "Package: orsbox-demo\nVersion: 1.0\nArchitecture: all\n"
        "Maintainer: orsbox <orsbox@example.org>\nDescription: demo\n"
    )
    (folder / "pkg" / "data.txt").write_text("demo data\n")
    tasks = [{"name": "alpha"}, {"name": "beta"}, {"name": "fail"}]
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (folder / "setup.sh").write_text(SETUP)
    (folder / "orsbox.toml").write_text(
        f'name = "{name}"\n'
        'prompt = "Task {name}"\n'
        'tools = ["bash"]\n'
        '[[splits]]\nname = "test"\ntasks = "tasks.jsonl"\n'
        '[setup]\ncopy = { "pkg" = "/tmp/pkg" }\nrun = """' + SETUP + '"""\n'
        'user = "root"\ncache = true\n'
        '[grader]\ncommand = "true"\n'
    )
    return folder


@pytest.fixture(scope="module")
def env_name() -> str:
    return f"prep-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def env_folder(tmp_path_factory: pytest.TempPathFactory, env_name: str) -> Path:
    return write_environment(tmp_path_factory.mktemp("prepared"), env_name)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
    env_name: str,
    env_folder: Path,
    base_image: str,
    docker_client: docker.DockerClient,
) -> Iterator[LiveServer]:
    live = start_container_server(
        tmp_path_factory.mktemp("server"), targets=[str(env_folder)], setup_wait_s=120
    )
    yield live
    live.stop()
    assert not labelled(docker_client, **{"orsbox.server": live.server_id})
    assert fork_images(docker_client, env_name) == [], "shutdown left fork images"
    for image in saved_states(docker_client, env_name):
        docker_client.images.remove(image["Id"])


def saved_states(client: docker.DockerClient, env_name: str) -> list[dict]:
    labels = ["orsbox.snapshot=prepared", f"orsbox.environment={env_name}"]
    return client.api.images(filters={"label": labels})


def fork_images(client: docker.DockerClient, env_name: str) -> list[dict]:
    labels = ["orsbox.snapshot=fork", f"orsbox.environment={env_name}"]
    return client.api.images(filters={"label": labels})


def open_task(server: LiveServer, env: str, index: int) -> Episode:
    sid = uuid.uuid4().hex
    body = {"env_name": env, "split": "test", "index": index}
    r = httpx.post(f"{server.url}/create", headers={"X-Session-ID": sid}, json=body, timeout=30)
    assert r.status_code == 200, r.text
    return Episode(server, sid, env)


def state(ep: Episode) -> tuple[str, str]:
    """(everything the setup made, the setup's time stamp)."""
    return ep.bash(STATE)[0], ep.bash("cat /opt/state/stamp")[0]


def fork(ep: Episode, n: int) -> httpx.Response:
    return httpx.post(
        f"{ep.server.url}/orsbox/fork",
        headers={"X-Session-ID": ep.sid},
        json={"n": n},
        timeout=120,
    )


def test_a_cached_setup_gives_the_state_a_fresh_one_gave(
    server: LiveServer, env_name: str, docker_client: docker.DockerClient
) -> None:
    first = open_task(server, env_name, 0)
    fresh, fresh_stamp = state(first)
    assert "orsbox-demo 1.0 install ok installed" in fresh
    assert "demo data\nalpha\n" in fresh
    assert len(saved_states(docker_client, env_name)) == 1
    first.delete()

    second = open_task(server, env_name, 0)
    cached, cached_stamp = state(second)
    assert cached_stamp == fresh_stamp, "the second episode ran the setup again"
    assert cached == fresh
    assert second.text("bash", command="whoami") == "orsbox\n"
    prompt = httpx.get(
        f"{server.url}/{env_name}/prompt", headers={"X-Session-ID": second.sid}, timeout=60
    )
    assert prompt.json()[0]["text"] == "Task alpha"
    second.delete()

    other = open_task(server, env_name, 1)  # another task: its own setup and entry
    other_state, other_stamp = state(other)
    assert other_stamp != fresh_stamp and "\nbeta\n" in other_state
    assert len(saved_states(docker_client, env_name)) == 2
    other.delete()


def test_a_failed_setup_is_not_cached(
    server: LiveServer, env_name: str, docker_client: docker.DockerClient
) -> None:
    before = {i["Id"] for i in saved_states(docker_client, env_name)}
    for _ in range(2):  # the second attempt runs the setup again and fails again
        ep = open_task(server, env_name, 2)
        answer = ep.call("bash", command="true")
        assert answer.status == 500 and "told to fail" in answer.raw, answer.raw
        ep.delete()
    assert {i["Id"] for i in saved_states(docker_client, env_name)} == before


def test_forks_share_the_source_files_and_nothing_after(
    server: LiveServer, env_name: str, docker_client: docker.DockerClient
) -> None:
    source = open_task(server, env_name, 1)
    source.bash("head -c 1000000 /dev/urandom > /workspace/big; echo mine > /workspace/note")
    source.bash("sleep 1000 > /dev/null 2>&1 &")
    answer = fork(source, 2)
    assert answer.status_code == 200, answer.text
    a, b = (Episode(server, sid, env_name) for sid in answer.json()["sids"])
    digest = source.bash("sha256sum /workspace/big")[0]
    for forked in (a, b):
        assert forked.bash("sha256sum /workspace/big")[0] == digest
        assert forked.bash("cat /workspace/note /opt/state/task.txt")[0] == "mine\nbeta\n"
        assert forked.bash("pgrep -c sleep || true")[0] == "0\n", "a process was carried"
    a.bash("echo from-a > /workspace/note; touch /workspace/only-a")
    assert b.bash("cat /workspace/note; ls /workspace/only-a 2>&1 || true")[0].startswith(
        "mine\nls: cannot access"
    )
    assert source.bash("cat /workspace/note; pgrep -c sleep")[0] == "mine\n1\n"
    assert len(fork_images(docker_client, env_name)) == 1

    a.delete()
    assert labelled(docker_client, **{"orsbox.session": a.sid}) == []
    assert len(fork_images(docker_client, env_name)) == 1, "removed while b runs from it"
    b.delete()
    assert labelled(docker_client, **{"orsbox.session": b.sid}) == []
    wait_until(lambda: fork_images(docker_client, env_name) == [], 15, 0.1, "fork image gone")
    assert source.bash("cat /workspace/note")[0] == "mine\n"
    source.delete()


def test_a_fork_waits_for_the_call_in_flight(
    server: LiveServer, env_name: str, docker_client: docker.DockerClient
) -> None:
    """A fork posted while a call runs on the source takes its turn after it (the
    session's call lock): its files are the whole call's, never half of it. The call
    writes its file at its end, 2 s in; the fork is posted once the server took the call."""
    source = open_task(server, env_name, 1)
    source.bash("true")  # set up and ready
    accepted = threading.Event()
    body = {"name": "bash", "input": {"command": "sleep 2; echo whole > /workspace/call"}}
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(
            post_sse, f"{server.url}/{env_name}/call", body, source.sid, 60, accepted
        )
        assert accepted.wait(30), "the server did not take the call"
        answer = fork(source, 1)
        assert call.result().result()["ok"] is True
    assert answer.status_code == 200, answer.text
    (forked,) = (Episode(server, sid, env_name) for sid in answer.json()["sids"])
    assert forked.bash("cat /workspace/call")[0] == "whole\n"
    forked.delete()
    source.delete()
    wait_until(lambda: fork_images(docker_client, env_name) == [], 15, 0.1, "fork image gone")


def test_a_fork_of_an_unknown_or_finished_session_is_an_ors_error(
    server: LiveServer, env_name: str
) -> None:
    unknown = Episode(server, uuid.uuid4().hex, env_name)
    answer = fork(unknown, 1)
    assert answer.status_code == 404 and "not found" in answer.json()["detail"]
    finished = open_task(server, env_name, 0)
    finished.delete()
    answer = fork(finished, 1)
    assert answer.status_code == 410 and "deleted" in answer.json()["detail"]
    live = open_task(server, env_name, 0)
    answer = fork(live, 0)
    assert answer.status_code == 400 and "n must be" in answer.json()["detail"]
    live.delete()


def test_the_python_client_forks(server: LiveServer, env_name: str) -> None:
    from orsbox.client import Session

    with Session(server.url, env_name, "test", 0) as source:
        source.call("bash", {"command": "echo shared > /workspace/shared"})
        forks = source.fork(2)
        for forked in forks:
            with forked:
                result = forked.call("bash", {"command": "cat /workspace/shared"})
                assert result["output"]["blocks"][0]["text"] == "shared\n"
    for forked in forks:  # each was deleted on leaving its block
        r = httpx.post(f"{server.url}/ping", headers={"X-Session-ID": forked.sid}, timeout=30)
        assert r.status_code == 410


def test_gc_lists_and_prunes_saved_states(
    server: LiveServer, env_name: str, docker_client: docker.DockerClient
) -> None:
    ep = open_task(server, env_name, 0)  # the saved state of task 0 exists now
    ep.delete()
    assert saved_states(docker_client, env_name)
    argv = [sys.executable, "-m", "orsbox.cli.main", "gc", "--setup-snapshots"]
    done = subprocess.run(
        [*argv, "--environment", env_name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert done.returncode == 0, done.stderr
    assert f"orsbox-prepared/{env_name}" in done.stdout
    assert saved_states(docker_client, env_name) == []
    again = open_task(server, env_name, 0)  # the next episode sets up again
    assert again.bash("cat /opt/state/task.txt")[0] == "alpha\n"
    assert len(saved_states(docker_client, env_name)) == 1
    again.delete()


def test_warming_a_cached_task_pools_its_setup_snapshot(
    server: LiveServer, env_name: str, docker_client: docker.DockerClient
) -> None:
    first = open_task(server, env_name, 1)
    first.bash("true")  # its setup is done: task 1's state is saved
    first.delete()
    saved = {i["Id"] for i in saved_states(docker_client, env_name)}
    body = {"env_name": env_name, "count": 2, "split": "test", "index": 1}
    answer = httpx.post(f"{server.url}/orsbox/warm", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["image"] in saved and answer.json()["target"] == 2
    pooled = {"orsbox.server": server.server_id, "orsbox.session": "pool"}
    wait_until(lambda: idle(server.url, body) == 2, 60, 0.1, "two ready")

    ep = open_task(server, env_name, 1)
    assert ep.bash("cat /opt/state/task.txt")[0] == "beta\n"
    assert labelled(docker_client, **{"orsbox.session": ep.sid}) == [], "not from the pool"
    ep.delete()
    body["count"] = 0  # warmed sandboxes are removed on request
    assert httpx.post(f"{server.url}/orsbox/warm", json=body, timeout=60).status_code == 200
    wait_until(lambda: labelled(docker_client, **pooled) == [], 30, 0.1, "pool emptied")


def test_saved_states_survive_a_restart(
    server: LiveServer, env_name: str, env_folder: Path, tmp_path: Path
) -> None:
    ep = open_task(server, env_name, 0)
    _, saved_stamp = state(ep)  # from the saved state (or saved now)
    ep.delete()
    later = start_container_server(tmp_path, targets=[str(env_folder)], setup_wait_s=120)
    try:
        again = open_task(later, env_name, 0)
        assert state(again)[1] == saved_stamp, "a new server ran the setup again"
        again.delete()
    finally:
        later.stop()


def test_a_fork_of_a_fork_leaves_no_image(
    server: LiveServer, env_name: str, docker_client: docker.DockerClient
) -> None:
    source = open_task(server, env_name, 1)
    source.bash("echo one > /workspace/level")
    (first,) = (Episode(server, sid, env_name) for sid in fork(source, 1).json()["sids"])
    first.bash("echo two >> /workspace/level")
    (second,) = (Episode(server, sid, env_name) for sid in fork(first, 1).json()["sids"])
    assert second.bash("cat /workspace/level")[0] == "one\ntwo\n"
    first.delete()  # its image is the parent of the second fork's
    second.delete()
    source.delete()
    wait_until(lambda: fork_images(docker_client, env_name) == [], 15, 0.1, "fork images gone")
