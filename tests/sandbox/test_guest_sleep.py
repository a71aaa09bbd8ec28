"""The guest's sleep (orsbox/sandbox/guest/inside/sleep.py) on real engines: an idle
guest becomes a waiting bash, the container's memory drops, and the next call wakes it
with the persistent shell's state intact; a sandbox with a background job, or under
gVisor's memory watch, stays awake; a sandbox asleep still ends when the server lets go.

The guest's state is read from outside, as an operator would: a process the engine
enters in the container (`docker exec`), which never goes through the guest."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import docker
import pytest

from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.config import DockerConfig
from tests.runtimes import PODMAN_ENGINE, RUNSC_ENGINE, runtime_available
from tests.sandbox.conftest import BASE_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

SLEEP_AFTER_S = 0.3
ENGINES = {"runc": None, "podman": PODMAN_ENGINE}
WAIT_S = 20.0


@pytest.fixture(params=list(ENGINES))
async def backend(request: pytest.FixtureRequest, base_image: str) -> AsyncIterator[DockerBackend]:
    if request.param != "runc":
        runtime_available(request.param)
    config = DockerConfig(engine=ENGINES[request.param], guest_sleep_after_s=SLEEP_AFTER_S)
    backend = DockerBackend(config=config)
    yield backend
    await backend.close()


def engine_client(backend: DockerBackend) -> docker.DockerClient:
    engine = backend.config.engine
    return docker.DockerClient(base_url=engine) if engine else docker.from_env()


GUEST_PROCESS = """for stat in /proc/[0-9]*/stat; do
    read -r pid comm state ppid rest < "$stat" && [ "$ppid" = 1 ] && echo "$pid $comm"
done | sort -n | head -1 | { read -r pid comm
    echo "$comm $(grep ^VmRSS: /proc/$pid/status | tr -dc 0-9)"; }"""


def guest_process(client: docker.DockerClient, container_id: str) -> dict[str, Any]:
    """The guest, seen from outside: the first child of the container's init, read by a
    process the engine enters (its parent is outside the container: the guest's sleep
    ignores it, and it never goes through the guest)."""
    code, output = client.containers.get(container_id).exec_run(["bash", "-c", GUEST_PROCESS])
    comm, rss_kib = output.decode().split()
    assert code == 0, output
    return {"rss_kib": int(rss_kib), "command": comm.strip("()")}


def asleep(process: dict[str, Any]) -> bool:
    """Awake the guest is python; asleep, the bash that waits for the next request."""
    return process["command"] == "bash"


async def until(check: Callable[[], bool], what: str) -> None:
    """Poll the engine's listing until `check` holds (an event: the guest's exec)."""
    with anyio.fail_after(WAIT_S):
        while not await anyio.to_thread.run_sync(check):
            await anyio.sleep(0.05)


async def test_an_idle_guest_sleeps_and_the_next_call_wakes_it_with_the_shell_intact(
    backend: DockerBackend,
) -> None:
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE))
    client = engine_client(backend)
    try:
        setup = "cd /tmp && export ORSBOX_X=42 && f() { echo fn-$ORSBOX_X; }"
        assert (await sandbox.shell(setup)).exit_code == 0
        # a job of the user's holds the guest awake while it is read from outside: a
        # look at most 0.3 s after the call would race the sleep on a loaded machine
        await sandbox.shell("sleep 600 & echo $! > /tmp/hold")
        awake = guest_process(client, sandbox.id)
        assert not asleep(awake)
        await sandbox.shell("kill $(cat /tmp/hold); wait")
        await until(lambda: asleep(guest_process(client, sandbox.id)), "the guest's sleep")
        sleeping = guest_process(client, sandbox.id)
        # python's interpreter (~9.5 MiB resident, 3.4 MiB its own) gave way to bash
        assert sleeping["rss_kib"] < awake["rss_kib"] / 2, (awake, sleeping)

        # only a woken guest answers (bash reads one byte and no frame); the shell's
        # state came through the sleep
        woken = await sandbox.shell("echo $(pwd) $ORSBOX_X; f")
        assert (woken.exit_code, woken.output) == (0, "/tmp 42\nfn-42\n")
        # files, one-off commands and a second sleep work the same
        await until(lambda: asleep(guest_process(client, sandbox.id)), "a second sleep")
        await sandbox.write_file("/tmp/a.txt", b"\x00data\xff")
        assert await sandbox.read_file("/tmp/a.txt") == b"\x00data\xff"
        await until(lambda: asleep(guest_process(client, sandbox.id)), "a third sleep")
        assert (await sandbox.exec(["echo", "one-off"])).output == "one-off\n"
        await until(lambda: asleep(guest_process(client, sandbox.id)), "a fourth sleep")
        assert await sandbox.kill_processes() >= 1  # the shell, as before a grader
        assert (await sandbox.shell("echo fresh; echo ${ORSBOX_X:-gone}")).output == (
            "fresh\ngone\n"
        )
    finally:
        await sandbox.close()
        client.close()


async def test_a_background_job_keeps_the_guest_awake(backend: DockerBackend) -> None:
    """Its output would fill the shell's pipe with no guest to read it: no sleep while
    it runs, nor while what it printed waits for the next call; after that call, the
    guest sleeps."""
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE))
    client = engine_client(backend)
    try:
        await sandbox.shell("(sleep 2; echo done) &")
        with anyio.move_on_after(3.0):  # ten times the sleep delay, the job done at 2 s
            await until(lambda: asleep(guest_process(client, sandbox.id)), "no sleep")
        assert not asleep(guest_process(client, sandbox.id))
        result = await sandbox.shell("true")
        assert result.exit_code == 0 and "done" in result.output  # printed between calls
        await until(lambda: asleep(guest_process(client, sandbox.id)), "the sleep after it")
    finally:
        await sandbox.close()
        client.close()


async def test_a_sleeping_sandbox_ends_when_the_server_lets_go(backend: DockerBackend) -> None:
    """The dead-man's switch holds asleep: stdin's end wakes the guest, which stops
    the container."""
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE))
    client = engine_client(backend)
    try:
        await until(lambda: asleep(guest_process(client, sandbox.id)), "the guest's sleep")
        sandbox._channel.close()  # the server's end of the guest's stdin, gone (a crash's)
        container = client.containers.get(sandbox.id)

        def ended() -> bool:
            try:
                container.reload()
            except docker.errors.APIError as e:  # Podman: a 500 saying so
                if e.status_code == 404 or "no such container" in str(e):
                    return True
                raise
            return container.status != "running"

        await until(ended, "the container's end")
    finally:
        await sandbox.close()
        client.close()


async def test_under_gvisor_the_guest_stays_awake(base_image: str) -> None:
    """gVisor's guest watches memory (it has no OOM killer inside): it must not sleep."""
    runtime_available("runsc")
    config = DockerConfig(engine=RUNSC_ENGINE, runtime="runsc", guest_sleep_after_s=SLEEP_AFTER_S)
    backend = DockerBackend(config=config)
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE))
    client = engine_client(backend)
    try:
        await sandbox.shell("true")
        with anyio.move_on_after(2.0):
            await until(lambda: asleep(guest_process(client, sandbox.id)), "no sleep")
        assert not asleep(guest_process(client, sandbox.id))
    finally:
        await sandbox.close()
        client.close()
        await backend.close()
