"""Bombs under gVisor (issue 23): a fork bomb and a single process's memory bomb end the
bomb, not the sandbox.

On the private runsc engine (tests/runtimes.py), at the sandbox layer, with the machine
loaded on purpose: two CPU-bound host processes run beside every bomb. The fork bomb
runs `ORSBOX_GVISOR_BOMB_RUNS` times, each in a fresh sandbox (5 in CI; the issue's
check is 20: `ORSBOX_GVISOR_BOMB_RUNS=20 pytest tests/adversarial/test_gvisor_bombs.py`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator

import docker
import pytest

from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker import DockerBackend, DockerSandbox
from tests.runtimes import RUNSC_ENGINE, docker_backend, runtime_available

# serial: a bomb's answer is bounded in time (±2 s), which holds on a machine not shared
pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.serial]

MIB = 1024**2
BOMB_RUNS = int(os.environ.get("ORSBOX_GVISOR_BOMB_RUNS", "5"))
FORK_BOMB = ":(){ :|:& };:; sleep 30"
BOMB_TIMEOUT_S = 5.0
CALL_SLACK_S = 2.0  # the call contract: a timed-out call returns within its timeout ± this
LIMITS = SandboxLimits(memory_bytes=512 * MIB)  # pids: the default 512


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cpu_load(sandbox: DockerSandbox) -> Iterator[None]:
    """Two CPU-bound processes beside the bomb, as on a loaded machine. Made after the
    sandbox, so they stop before it closes: runsc's teardown after a fork bomb once
    took past the test's 300 s beside them (a kill meeting the bomb's leftover stubs:
    `DockerSandbox._let_it_end`, which now avoids the kill)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for burner in burners:
        burner.kill()
        burner.wait()


@pytest.fixture
async def runsc(base_image: str) -> AsyncIterator[DockerBackend]:
    runtime_available("runsc")
    backend = docker_backend("runsc")
    yield backend
    await backend.close()


@pytest.fixture
async def sandbox(runsc: DockerBackend, base_image: str) -> AsyncIterator[DockerSandbox]:
    sandbox = await runsc.start(SandboxSpec(image=base_image, limits=LIMITS, session_id="bombs"))
    yield sandbox
    await sandbox.close()


async def user_processes(sandbox: DockerSandbox) -> int:
    """Processes in the sandbox besides PID 1, the guest and its shell: counted by the
    shell's own glob, which forks nothing (an `ls | grep` pipeline could list /proc
    before its `grep` existed)."""
    result = await sandbox.shell("echo /proc/[0-9]*", timeout_s=20)
    return len(result.output.split()) - 3  # init, guest, shell


@pytest.mark.parametrize("run", range(BOMB_RUNS))
async def test_a_fork_bomb_ends_and_the_session_answers(
    run: int, cpu_load: None, sandbox: DockerSandbox, record_property: Callable[..., None]
) -> None:
    """The call returns within its timeout ± 2 s (the call time is kept in the JUnit
    report as `call_s`, for the benchmark's distribution)."""
    started = time.monotonic()
    result = await sandbox.shell(FORK_BOMB, timeout_s=BOMB_TIMEOUT_S)
    took = time.monotonic() - started
    record_property("call_s", round(took, 3))
    assert abs(took - BOMB_TIMEOUT_S) <= CALL_SLACK_S, f"the call took {took:.2f}s"
    assert result.timed_out, result
    assert "killed" in result.output, result.output
    assert await user_processes(sandbox) == 0, "the bomb outlived its call"
    after = await sandbox.shell("(echo forked); echo $((6 * 7))", timeout_s=20)
    assert after.output.endswith("forked\n42\n"), after.output
    assert await user_processes(sandbox) == 0, "the bomb grew back"


async def test_one_process_allocating_past_the_memory_fails_inside(
    cpu_load: None, sandbox: DockerSandbox
) -> None:
    """gVisor has no OOM killer inside: the guest gives each command RLIMIT_AS = the
    sandbox's memory, so the allocation fails (MemoryError) instead of the host
    killing the whole sandbox."""
    result = await sandbox.shell('python3 -c "b = bytearray(6 * 1024**3)"', timeout_s=60)
    assert result.exit_code == 1 and "MemoryError" in result.output, result
    past = await sandbox.shell('python3 -c "b = bytearray(600 * 1024**2)"', timeout_s=60)
    assert past.exit_code == 1 and "MemoryError" in past.output, past
    within = await sandbox.shell(
        'python3 -c "b = bytearray(300 * 1024**2); print(len(b))"', timeout_s=60
    )
    assert within.output == f"{300 * MIB}\n", within
    assert (await sandbox.shell("echo alive", timeout_s=20)).output == "alive\n"


# Five processes of 160 MiB: together past the sandbox's 512 MiB (two fit), and, with
# python and the guest, under the host's bound (1,024 MiB), so the sandbox lives however
# late the watch looks (with the watch off the host cgroup peaked at 848 MiB, 6 runs, and
# nothing was killed: the assertions below fail without it). Eight of 200 MiB race the watch to the host's bound, which it
# can lose under load: that race is measured, not asserted (bench/gvisor_memory_race.py).
MANY_PROCESS_BOMB = (
    "for i in $(seq 5); do"
    ' python3 -c "b = bytearray(160 * 1024**2); import time; time.sleep(5)" &'
    " done; wait; echo waited"
)


async def test_processes_that_together_pass_the_memory_are_killed_not_the_sandbox(
    cpu_load: None, sandbox: DockerSandbox
) -> None:
    """Processes that each stay under RLIMIT_AS but together pass the sandbox's memory:
    the guest's memory watch kills the largest while the guest's memory is past the
    sandbox's, as runc's OOM killer would; the call says so, the rest end as they would
    have, and the session goes on (docs/gvisor.md, 'oom')."""
    result = await sandbox.shell(MANY_PROCESS_BOMB, timeout_s=60)
    assert result.oom_killed, result
    assert "out of memory: killed process" in result.output, result.output
    assert "waited" in result.output, result.output
    assert (await sandbox.shell("echo alive", timeout_s=20)).output == "alive\n"
    assert await user_processes(sandbox) == 0


async def test_after_a_fork_bomb_the_sandbox_ends_itself_and_is_never_killed(
    runsc: DockerBackend, base_image: str
) -> None:
    """The bomb leaves gVisor a host stub process per address space it made; closing the
    sandbox stops the container by the guest's own switch, so the engine never kills it
    while those stubs end (a kill that meets them can deadlock containerd 1.6's shim:
    `DockerSandbox._let_it_end`). Seen in the engine's own events: the container dies,
    and no `kill` is ever sent to it."""
    since = int(time.time())
    sandbox = await runsc.start(SandboxSpec(image=base_image, limits=LIMITS))
    client = docker.DockerClient(base_url=RUNSC_ENGINE)
    try:
        assert (await sandbox.shell(FORK_BOMB, timeout_s=BOMB_TIMEOUT_S)).timed_out
        await sandbox.close()  # returns once the engine no longer lists the container
        events = client.api.events(
            since=since, until=int(time.time()) + 1, filters={"container": sandbox.id}, decode=True
        )
        actions = [event["Action"] for event in events]
        assert "die" in actions, actions
        assert "kill" not in actions, actions
    finally:
        await sandbox.close()
        client.close()
