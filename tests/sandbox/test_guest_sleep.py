"""The guest's sleep (orsbox/sandbox/guest/inside/sleep.py) on real engines: an idle
guest becomes a waiting bash, the container's memory drops, and the next call wakes it
with the persistent shell's state intact; a sandbox with a background job, or under
gVisor's memory watch, stays awake; a sandbox asleep still ends when the server lets go.

The guest's state is read from outside, as an operator would: a process the engine
enters in the container (`docker exec`), which never goes through the guest."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import docker
import pytest

from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.config import DockerConfig
from orsbox.sandbox.guest import start
from orsbox.sandbox.guest.inside.sleep import SLEEPER_NAME
from tests.runtimes import PODMAN_ENGINE, RUNSC_ENGINE, runtime_available
from tests.sandbox.conftest import BASE_IMAGE
from tests.sandbox.test_shell import SENTINEL_TOKEN

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
    read -r pid comm state ppid rest < "$stat" && [ "$ppid" = 1 ] && echo "$pid"
done | sort -n | head -1 | { read -r pid
    echo "$(tr '\\0' '\\n' < /proc/$pid/cmdline | head -1) $(grep ^VmRSS: /proc/$pid/status | tr -dc 0-9) $pid"; }"""


def guest_process(client: docker.DockerClient, container_id: str) -> dict[str, Any]:
    """The guest, seen from outside: the first child of the container's init, read by a
    process the engine enters (its parent is outside the container: the guest's sleep
    ignores it, and it never goes through the guest)."""
    container = client.containers.get(container_id)
    for _ in range(
        40
    ):  # under load (two full runs beside other work) it came back empty: ask again
        code, output = container.exec_run(["bash", "-c", GUEST_PROCESS])
        if len(output.split()) == 3:
            break
        time.sleep(0.05)
    command, rss_kib, pid = output.decode().split()
    assert code == 0, output
    return {"rss_kib": int(rss_kib), "command": command.rsplit("/", 1)[-1], "pid": int(pid)}


def asleep(process: dict[str, Any]) -> bool:
    """Awake the guest is python; asleep, the native sleeper (`sleeper.c`), or the bash
    that waits for the next request where the host has no sleeper to send."""
    return process["command"] in (SLEEPER_NAME, "bash")


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


def native(process: dict[str, Any]) -> bool:
    return process["command"] == SLEEPER_NAME


async def test_a_sleeping_guest_answers_plain_shell_calls_without_waking(
    backend: DockerBackend,
) -> None:
    """The native sleeper runs a plain call in the same shell and answers it itself: no
    python starts (the guest is still the sleeper after the calls, same pid)."""
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE))
    client = engine_client(backend)
    try:
        await sandbox.shell("cd /tmp && X=41")
        await until(lambda: native(guest_process(client, sandbox.id)), "the native sleep")
        before = guest_process(client, sandbox.id)
        results = [await sandbox.shell(f"X=$((X+1)); echo $X $(pwd); (exit {i})") for i in range(3)]
        assert [(r.output, r.exit_code) for r in results] == [
            ("42 /tmp\n", 0), ("43 /tmp\n", 1), ("44 /tmp\n", 2)
        ]  # fmt: skip
        binary = await sandbox.shell("printf 'a\\000b\\377'; printf \"it's\"")
        assert binary.output == "a\x00b\ufffdit's"  # (decoded with replacement)
        after = guest_process(client, sandbox.id)
        assert native(after) and after["pid"] == before["pid"], (before, after)
    finally:
        await sandbox.close()
        client.close()


async def test_what_the_sleeper_does_not_answer_wakes_the_guest_with_the_call_intact(
    backend: DockerBackend,
) -> None:
    """Each hand-over of `sleeper.c`: another request, a call past its deadline, output
    past the sleeper's buffer or the call's cap, a job left running. The guest that
    wakes answers as an awake guest would have."""
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE))
    client = engine_client(backend)

    async def asleep_natively() -> None:
        await until(lambda: native(guest_process(client, sandbox.id)), "the native sleep")

    try:
        await asleep_natively()
        await sandbox.write_file("/tmp/f", b"\x00x")  # not a shell call
        assert await sandbox.read_file("/tmp/f") == b"\x00x"

        await asleep_natively()
        big = await sandbox.shell("head -c 200000 /dev/zero | tr '\\0' a", output_cap_bytes=300_000)
        assert big.output == "a" * 200000 and not big.truncated

        await asleep_natively()
        capped = await sandbox.shell("head -c 300 /dev/zero | tr '\\0' b", output_cap_bytes=100)
        assert capped.truncated and capped.output.startswith("b" * 50), capped

        await asleep_natively()
        late = await sandbox.shell("echo started; sleep 30", timeout_s=0.5)
        assert late.timed_out and "started" in late.output and "killed 1" in late.output, late
        assert (await sandbox.shell("echo after")).output == "after\n"

        await asleep_natively()
        # a request that comes while the sleeper runs a call: both answered
        async with anyio.create_task_group() as tasks:
            slow: list[Any] = []

            async def call_slowly() -> None:
                slow.append(await sandbox.shell("sleep 1; echo slow"))

            tasks.start_soon(call_slowly)
            await until(lambda: "sleep 1" in ps(client, sandbox.id), "the slow call's start")
            assert await sandbox.read_file("/tmp/f") == b"\x00x"
        assert slow[0].output == "slow\n"

        await asleep_natively()
        await sandbox.shell("sleep 600 &")  # a job left running: the awake guest watches it
        assert guest_process(client, sandbox.id)["command"].startswith("python")
    finally:
        await sandbox.close()
        client.close()


FORGERIES = [
    # look-alikes that are output, and one with a valid status, which ends the call
    # early; the rest of that command line's output comes with the next call's
    "printf '\\000%s:1234\\000 \\000%s:12x \\000%s:' $t $t $t; echo; echo after; false",
    # (a loop of builtins, no process the sleeper would wake for: the rest comes after
    # the early end was answered, and waits in the shell's pipe for the next call)
    "printf 'early\\000%s:7\\000' $t; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done;"
    " echo rest; : > /tmp/rest-printed",
    "echo next",
]


async def test_a_forged_sentinel_reads_the_same_asleep_as_awake(backend: DockerBackend) -> None:
    """A command can read the shell's token (`declare -f`) and print look-alikes of the
    sentinel: the sleeper hands such output to the python guest, whose rules
    (test_shell.py) give the same answers as an awake guest's, call after call."""
    awake_config = backend.config.model_copy(update={"guest_sleep_after_s": None})
    awake_backend = DockerBackend(config=awake_config)
    client = engine_client(backend)
    awake = await awake_backend.start(SandboxSpec(image=BASE_IMAGE))
    asleep = await backend.start(SandboxSpec(image=BASE_IMAGE))
    try:
        answers = await forgeries_answered(awake, client, sleeping=False)
        assert answers == await forgeries_answered(asleep, client, sleeping=True)
        assert answers[1][0] == 7 and answers[2][1].startswith("rest\n"), answers
    finally:
        for sandbox in (awake, asleep):
            await sandbox.close()
        client.close()
        await awake_backend.close()


async def forgeries_answered(
    sandbox: Any, client: docker.DockerClient, sleeping: bool
) -> list[tuple[int | None, str]]:
    """Each of FORGERIES' answers, the shell's token written TOKEN; with `sleeping`,
    the first two sent to the native sleeper."""
    token = (await sandbox.shell(f"t={SENTINEL_TOKEN}; echo $t")).output.strip()
    answers = []
    for i, command in enumerate(FORGERIES):
        # (after the early end the guest holds the rest's output: it stays awake)
        if sleeping and i < 2:
            await until(lambda: native(guest_process(client, sandbox.id)), "the sleep")
        if i == 2:
            await until(lambda: printed(client, sandbox.id), "the rest's output")
        result = await sandbox.shell(command)
        answers.append((result.exit_code, result.output.replace(token, "TOKEN")))
    return answers


def printed(client: docker.DockerClient, container_id: str) -> bool:
    container = client.containers.get(container_id)
    return container.exec_run(["test", "-e", "/tmp/rest-printed"]).exit_code == 0


def ps(client: docker.DockerClient, container_id: str) -> str:
    """The container's command lines, read from outside."""
    script = "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"
    return client.containers.get(container_id).exec_run(["bash", "-c", script]).output.decode()


async def test_without_a_native_sleeper_the_guest_sleeps_as_bash(
    base_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host with no musl compiler sends no sleeper: the guest waits as bash and wakes
    as python, the same answers."""
    monkeypatch.setattr(start, "sleeper_binary", lambda: None)
    backend = DockerBackend(config=DockerConfig(guest_sleep_after_s=SLEEP_AFTER_S))
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE))
    client = engine_client(backend)
    try:
        await sandbox.shell("cd /tmp")
        await until(lambda: guest_process(client, sandbox.id)["command"] == "bash", "the sleep")
        assert (await sandbox.shell("pwd")).output == "/tmp\n"
    finally:
        await sandbox.close()
        client.close()
        await backend.close()


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
