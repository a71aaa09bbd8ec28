"""The server's own image, run as an operator would: `orsbox/server:latest` with the
engine's socket mounted serves a bundled episode to the ors-sdk client, its sandboxes
are containers on the mounted engine, its idle guests sleep as the native sleeper its
wheel shipped (the image has no compiler to build one), and stopping it leaves none of
them behind.

It runs with this machine's host name (as with `--uts host`, or two Compose projects'
`hostname: cell-1`), so a server on the host sees sandboxes whose owner label names this
host and a pid that means nothing here: the pid namespace in the owner labels is what
keeps its sweep (and `orsbox gc`, `orsbox ps`) from judging a live session's owner dead.
(The test asks the judgement itself rather than running `orsbox gc`, which would also
sweep the dead servers of other runs sharing this engine.)"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import suppress

import docker
import httpx
import pytest

from orsbox.cluster.images import SERVER_IMAGE
from orsbox.sandbox.guest.inside.sleep import SLEEPER_NAME
from orsbox.sandbox.host import owner as L
from orsbox.sandbox.procfs import pid_namespace as procfs_pid_namespace
from orsbox.sandbox.procfs import process_start_time
from tests.deploy.server_containers import (
    open_terminal_session,
    pid_namespace,
    play_terminal_episode,
    remove_all,
    require_images,
    sandboxes_of,
)
from tests.servers import free_port
from tests.sse_client import post_sse
from tests.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.deploy]

TOKEN = "image-token-0123456789abcdef"
START_TIMEOUT_S = 60
SLEEP_AFTER_S = 1  # its guests sleep when idle this long (the native sleeper test)
# run in the server's container: whether it has a compiler, and a shipped sleeper it uses
SHIPPED_CHECK = (
    "import shutil; from orsbox.sandbox.guest.sleeper import shipped_binary; "
    "print(shutil.which('musl-gcc'), shipped_binary() is not None)"
)


@pytest.fixture(scope="module")
def server(docker_client: docker.DockerClient) -> Iterator[tuple[str, str]]:
    """(url, container id) of a running orsbox/server, shared by the module's tests (the
    last one stops it); removed, with any sandbox it left, whatever the tests did."""
    require_images(docker_client, SERVER_IMAGE)
    port = free_port()
    container = docker_client.containers.run(
        SERVER_IMAGE,
        detach=True,
        name=f"orsbox-test-server-{uuid.uuid4().hex[:8]}",
        hostname=socket.gethostname(),
        environment={
            "ORSBOX_TOKEN": TOKEN,
            "ORSBOX_BACKEND": f'{{"type": "docker", "guest_sleep_after_s": {SLEEP_AFTER_S}}}',
        },
        volumes={"/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"}},
        ports={"8080/tcp": ("127.0.0.1", port)},
        labels={"orsbox-test": "server-image"},
    )
    namespace = ""
    try:
        url = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        wait_until(lambda: healthy(url), START_TIMEOUT_S, 0.1, "the server's /health")
        print(f"\norsbox/server: /health answered {time.monotonic() - started:.2f}s after run")
        namespace = pid_namespace(docker_client, container.id)
        yield url, container.id
    finally:
        remove_all(docker_client, [container.id])
        if namespace:
            remove_all(docker_client, sandboxes_of(docker_client, namespace))


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def live_labels(client: docker.DockerClient, namespace: str) -> dict[str, str] | None:
    """The labels of one of the server's sandboxes still there when inspected: one
    listed may be gone a moment later (a session's setup container, say, once its
    snapshot is taken)."""
    for container_id in sandboxes_of(client, namespace):
        with suppress(docker.errors.NotFound):
            return client.api.inspect_container(container_id)["Config"]["Labels"]
    return None


def test_the_host_never_judges_a_containerised_servers_sandboxes(
    server: tuple[str, str], docker_client: docker.DockerClient
) -> None:
    """Its sandboxes carry this host's name and a pid from another namespace."""
    url, container_id = server
    namespace = pid_namespace(docker_client, container_id)
    headers = {"X-API-Key": TOKEN, "X-Session-ID": open_terminal_session(url, TOKEN)}
    labels = wait_until(lambda: live_labels(docker_client, namespace), 30, 0.1, "a sandbox")
    assert labels[L.HOST] == socket.gethostname() and labels[L.PID_NAMESPACE] == L.namespace_value(
        namespace
    )

    # its pid, read in this namespace, is another process or none at all
    assert process_start_time(int(labels[L.PID])) != labels[L.PID_START]
    assert not L.owner_is_dead(labels) and L.owner_state(labels) == "elsewhere"
    assert httpx.post(f"{url}/delete", headers=headers, timeout=30).status_code == 200
    wait_until(lambda: not sandboxes_of(docker_client, namespace), 30, 0.1, "the sandbox gone")


BASH_TRUE = {"name": "bash", "input": {"command": "true"}}


def sleeping_natively(client: docker.DockerClient, namespace: str) -> bool:
    """Whether one of the server's sandboxes has its guest asleep as the native sleeper
    (its argv[0]; a guest asleep as bash is a `bash -c`), read by a process the engine
    enters, not through the guest."""
    script = "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"
    for container_id in sandboxes_of(client, namespace):
        with suppress(docker.errors.NotFound, docker.errors.APIError):
            listing = client.containers.get(container_id).exec_run(["sh", "-c", script])
            if SLEEPER_NAME in listing.output.decode(errors="replace"):
                return True
    return False


def test_idle_guests_sleep_as_the_sleeper_the_image_shipped(
    server: tuple[str, str], docker_client: docker.DockerClient
) -> None:
    """The image has no musl-gcc, yet its guests do not sleep as bash: the sleeper is
    the one built with orsbox's wheel (`orsbox build --server`), checked and used."""
    url, container_id = server
    checked = docker_client.containers.get(container_id).exec_run(["python", "-c", SHIPPED_CHECK])
    assert checked.output.decode().split() == ["None", "True"], checked.output
    namespace = pid_namespace(docker_client, container_id)
    sid = open_terminal_session(url, TOKEN)
    headers = {"X-API-Key": TOKEN, "X-Session-ID": sid}
    # A first call: the session's setup, and the snapshot of it (`cache = true`), are
    # done. Only then may a process enter its sandbox from outside: an exec into a
    # container paused for its commit hangs it (docs/operating/setup-snapshots.md).
    first = post_sse(f"{url}/terminal/call", BASH_TRUE, sid, **{"X-API-Key": TOKEN})
    assert first.result()["ok"] is True, first.events
    wait_until(lambda: sleeping_natively(docker_client, namespace), 30, 0.1, "a native sleep")
    assert httpx.post(f"{url}/delete", headers=headers, timeout=30).status_code == 200
    wait_until(lambda: not sandboxes_of(docker_client, namespace), 30, 0.1, "the sandbox gone")


def test_the_image_serves_a_bundled_episode_and_stops_clean(  # last: it stops the server
    server: tuple[str, str], docker_client: docker.DockerClient
) -> None:
    url, container_id = server
    namespace = pid_namespace(docker_client, container_id)
    assert namespace != procfs_pid_namespace()
    assert httpx.get(f"{url}/list_environments", timeout=10).status_code == 401  # token on
    assert play_terminal_episode(url, TOKEN) == 1.0
    open_terminal_session(url, TOKEN)  # still open when the server is stopped: the stop must end it
    wait_until(lambda: sandboxes_of(docker_client, namespace), 30, 0.1, "its sandbox")

    container = docker_client.containers.get(container_id)
    container.stop(timeout=30)
    assert container.wait(timeout=30)["StatusCode"] == 0, container.logs()[-2000:]
    assert sandboxes_of(docker_client, namespace) == []
