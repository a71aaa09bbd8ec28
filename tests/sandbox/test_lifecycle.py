"""Starting, listing, losing, closing and sweeping Docker sandboxes (real engine)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import anyio
import docker
import pytest

from orsbox.errors import ImageNotFound, SandboxGone, SandboxStartError
from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker import DockerBackend, DockerSandbox
from orsbox.sandbox.host import owner as L
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


async def test_missing_image_says_how_to_build_it(backend: DockerBackend) -> None:
    with pytest.raises(ImageNotFound) as info:
        await backend.start(SandboxSpec(image="orsbox/no-such-image:1"))
    assert "orsbox/no-such-image:1" in str(info.value) and "docker build" in str(info.value)
    assert "--image-map orsbox/no-such-image:1=IMAGE" in str(info.value)


async def test_failed_start_leaves_nothing(backend: DockerBackend, base_image: str) -> None:
    with pytest.raises(SandboxStartError):
        await backend.start(SandboxSpec(image=base_image, user="no-such-user"))
    assert await backend.list() == []


async def test_cancelled_start_leaves_nothing(backend: DockerBackend, base_image: str) -> None:
    for delay in (0.05, 0.15, 0.3):
        with anyio.move_on_after(delay):
            await backend.start(SandboxSpec(image=base_image))
        await backend.close()  # whatever did start
    assert await backend.list() == []


async def test_labels_list_and_close(backend: DockerBackend, base_image: str) -> None:
    spec = SandboxSpec(image=base_image, session_id="s-1", labels={"team": "blue"})
    sandbox = await backend.start(spec)
    [info] = await backend.list()
    assert (info.id, info.session_id, info.server_id) == (sandbox.id, "s-1", backend.server_id)
    assert info.labels["team"] == "blue" and info.labels[L.PID] == str(os.getpid())
    assert info.labels[L.HOST] == socket.gethostname() and info.status == "running"
    assert sandbox.id in {i.id for i in await backend.list(all_servers=True)}
    await sandbox.close()
    await sandbox.close()  # idempotent
    assert not sandbox.alive
    assert await backend.list() == []
    with pytest.raises(SandboxGone, match="closed"):
        await sandbox.shell("echo hi")


async def test_every_label_of_a_container_is_a_kubernetes_label(base_image: str) -> None:
    """Whatever the server id, the session id and the environment's labels look like."""
    from tests.sandbox.test_labels import kubernetes_takes_key, kubernetes_takes_value

    server = f"test-labels:{os.getpid()}/" + "x" * 70
    backend = DockerBackend(server)
    try:
        session = "3f2a9c1e-7b7d-4c55-9a8e-1f0f3c7d2b11.cell:" + "c" * 40
        labels = {"orsbox.environment": "sandbox:math", "orsbox.task": "a task/name"}
        sandbox = await backend.start(
            SandboxSpec(image=base_image, session_id=session, labels=labels)
        )
        [info] = await backend.list()
        assert info.id == sandbox.id and info.labels["orsbox.environment"] == "sandbox_math"
        for key, value in info.labels.items():
            assert kubernetes_takes_key(key) and kubernetes_takes_value(value), (key, value)
        assert await backend.sweep() == 0  # its own: never judged dead
    finally:
        await backend.close()


async def test_killed_container_makes_the_sandbox_gone(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    await anyio.to_thread.run_sync(lambda: docker_client.api.kill(sandbox.id))
    await wait_until_async(lambda: not sandbox.alive, 10, 0.05, "the sandbox saw its death")
    with pytest.raises(SandboxGone) as info:
        await sandbox.shell("echo hi")
    assert "gone" in str(info.value) and (
        "killed" in str(info.value) or "removed" in str(info.value)
    )
    with pytest.raises(SandboxGone):
        await sandbox.read_file("/etc/hostname")
    await sandbox.close()


async def test_waiting_for_a_running_sandbox_to_stop_gives_up_quietly(
    backend: DockerBackend, sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    """`Engine.wait_stopped` past its timeout returns: the caller removes the container
    either way. The engine's `wait` answers its headers at once and its body when the
    container stops, so the timeout meets a body half-read, which requests reports as a
    ConnectionError, not a Timeout (docker-py#1966); a gVisor sandbox's close failed on
    it in a CI run."""
    await backend.engine.wait_stopped(sandbox.id, 1)
    assert container_status(docker_client, sandbox.id) == "running"
    assert (await sandbox.shell("echo still here")).output == "still here\n"


OWNER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from orsbox.sandbox import SandboxSpec
    from orsbox.sandbox.docker import DockerBackend

    async def main():
        backend = DockerBackend()
        sandbox = await backend.start(SandboxSpec(image=sys.argv[1], session_id="orphan"))
        print(sandbox.id, flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_container_dies_with_its_server(
    base_image: str, docker_client: docker.DockerClient
) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, base_image],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    try:
        container_id = await anyio.to_thread.run_sync(owner.stdout.readline)  # type: ignore[union-attr]
        container_id = container_id.decode().strip()
        assert container_id, "the owner process did not start a sandbox"
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        # the attach's end is the guest's stdin EOF
        await wait_until_async(lambda: gone(docker_client, container_id), 10, 0.05, "no container")
    finally:
        owner.kill()
        owner.wait()


HALF_STARTED_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from orsbox.sandbox import SandboxSpec
    from orsbox.sandbox.docker import DockerBackend
    from orsbox.sandbox.host import owner as L
    from orsbox.sandbox.docker.options import container_name, container_options

    async def main():
        backend = DockerBackend()
        name = container_name("half")
        labels = L.sandbox_labels(backend.server_id, "half", {})
        spec = SandboxSpec(image=sys.argv[1], session_id="half")
        container_id = await backend.engine.create(container_options(spec, name, labels, {}))
        if sys.argv[2] == "started":  # attached and started; the guest never sent
            sock = await backend.engine.start_attached(container_id)
        print(container_id, flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


def container_status(docker_client: docker.DockerClient, container_id: str) -> str:
    found = docker_client.api.containers(all=True, filters={"id": container_id})
    return found[0]["State"] if found else "gone"


def gone(docker_client: docker.DockerClient, container_id: str) -> bool:
    return container_status(docker_client, container_id) == "gone"


async def run_killed_owner(script: str, *args: str) -> str:
    """Run `script` in a server-like process until it prints a container id, then
    SIGKILL it; return the id."""
    owner = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    try:
        line = await anyio.to_thread.run_sync(owner.stdout.readline)  # type: ignore[union-attr]
        assert line.strip(), "the owner process did not print a container id"
        return line.decode().strip()
    finally:
        owner.kill()
        owner.wait()


async def test_a_server_killed_after_start_before_the_guest_arrived_leaves_nothing(
    base_image: str, docker_client: docker.DockerClient
) -> None:
    """The loader reads EOF where the guest should come: it exits, the container too."""
    container_id = await run_killed_owner(HALF_STARTED_SCRIPT, base_image, "started")
    await wait_until_async(lambda: gone(docker_client, container_id), 10, 0.05, "no container")


@pytest.mark.serial  # any server's startup sweep removes dead owners' containers too
async def test_a_server_killed_before_start_leaves_an_inert_container_the_sweep_removes(
    backend: DockerBackend, base_image: str, docker_client: docker.DockerClient
) -> None:
    container_id = await run_killed_owner(HALF_STARTED_SCRIPT, base_image, "created")
    try:
        assert container_status(docker_client, container_id) == "created"  # runs nothing
        assert await backend.sweep() >= 1
        assert container_status(docker_client, container_id) == "gone"
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.api.remove_container(container_id, force=True)


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.serial  # any server's startup sweep removes dead owners' containers too
async def test_sweep_removes_only_containers_of_dead_servers(
    backend: DockerBackend, base_image: str, docker_client: docker.DockerClient
) -> None:
    mine = await backend.start(SandboxSpec(image=base_image))
    live_other = L.owner_labels("other-live-server")  # this very process: alive
    dead_other = {**L.owner_labels("dead-server"), L.PID: str(dead_pid())}
    reused_pid = {**L.owner_labels("reused-server"), L.PID_START: "1"}  # our pid, other start
    other_host = {**dead_other, L.SERVER: "far-server", L.HOST: "another-host"}

    def run(labels: dict[str, str]) -> str:
        container = docker_client.containers.run(
            base_image, ["sleep", "infinity"], detach=True, labels=labels, init=True
        )
        return container.id

    ids = {
        name: await anyio.to_thread.run_sync(run, labels)
        for name, labels in [
            ("live", live_other),
            ("dead", dead_other),
            ("reused", reused_pid),
            ("far", other_host),
        ]
    }
    try:
        assert await backend.sweep() >= 2  # more if a crashed run left some
        listed = docker_client.api.containers(all=True, filters={"label": "orsbox=1"})
        left = {c["Id"] for c in listed}  # not containers.list: it races other runs' removals
        assert ids["dead"] not in left and ids["reused"] not in left
        assert {ids["live"], ids["far"], mine.id} <= left
        assert (await mine.shell("echo alive")).output == "alive\n"
    finally:
        for container_id in ids.values():
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.api.remove_container(container_id, force=True)


async def test_health(backend: DockerBackend) -> None:
    assert await backend.health() is None
    broken = DockerBackend(
        client=docker.DockerClient(base_url="unix:///nonexistent.sock", version="1.41")
    )
    reason = await broken.health()
    assert reason is not None and "unreachable" in reason


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1])


async def test_32_sandboxes_at_once(backend: DockerBackend, base_image: str) -> None:
    n = 32
    sandboxes: list[DockerSandbox] = []
    rss_before = rss_kib()

    async def start_one(i: int) -> None:
        sandboxes.append(await backend.start(SandboxSpec(image=base_image, session_id=f"c{i}")))

    start = time.monotonic()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(start_one, i)
    started_s = time.monotonic() - start
    rss_per_sandbox = (rss_kib() - rss_before) / n
    outputs: dict[int, list[str]] = {}

    async def work(i: int, sandbox: DockerSandbox) -> None:
        outputs[i] = [(await sandbox.shell(f"echo {i}-{k}")).output for k in range(5)]

    async with anyio.create_task_group() as tg:
        for i, sandbox in enumerate(sandboxes):
            tg.start_soon(work, i, sandbox)
    assert outputs == {i: [f"{i}-{k}\n" for k in range(5)] for i in range(n)}
    start = time.monotonic()
    await backend.close()
    closed_s = time.monotonic() - start
    print(
        f"\n32 sandboxes: started in {started_s:.1f}s, closed in {closed_s:.1f}s, "
        f"host RSS {rss_per_sandbox:.0f} KiB per sandbox"
    )
    assert await backend.list() == []


async def test_shell_round_trip_latency(sandbox: DockerSandbox) -> None:
    for _ in range(50):
        await sandbox.shell("echo hi")
    times = []
    for _ in range(1000):
        start = time.perf_counter()
        result = await sandbox.shell("echo hi")
        times.append(time.perf_counter() - start)
        assert result.output == "hi\n"
    times.sort()
    p50, p99 = times[500] * 1e3, times[990] * 1e3
    print(f"\nshell echo round trip: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    assert p50 < 5


async def test_the_configured_image_map_rewrites_every_sandbox_image(base_image: str) -> None:
    """Through the factory, which applies the operator's options in front of any backend
    (`orsbox.sandbox.operator_options`)."""
    from orsbox.sandbox.config import create_backend
    from orsbox.sandbox.docker.config import DockerConfig

    backend = create_backend(DockerConfig(image_map=[f"ubuntu:24.04={base_image}"]))
    try:
        sandbox = await backend.start(SandboxSpec(image="ubuntu:24.04", session_id="mapped"))
        assert (await sandbox.shell("echo mapped")).output == "mapped\n"
        [info] = await backend.list()
        assert info.image == base_image
    finally:
        await backend.close()


async def test_the_configured_default_limits_reach_the_container(
    base_image: str, docker_client: docker.DockerClient
) -> None:
    from orsbox.sandbox.config import create_backend
    from orsbox.sandbox.docker.config import DockerConfig

    config = DockerConfig(default_limits={"memory_bytes": 300 * 1024**2, "cpus": 0.5})
    backend = create_backend(config)
    try:
        own = SandboxSpec(image=base_image, session_id="own", limits=SandboxLimits(cpus=0.25))
        defaulted = await backend.start(SandboxSpec(image=base_image, session_id="defaulted"))
        chosen = await backend.start(own)
        host = docker_client.api.inspect_container(defaulted.id)["HostConfig"]
        assert (host["Memory"], host["NanoCpus"]) == (300 * 1024**2, 500_000_000)
        host = docker_client.api.inspect_container(chosen.id)["HostConfig"]
        assert (host["Memory"], host["NanoCpus"]) == (300 * 1024**2, 250_000_000)
    finally:
        await backend.close()
