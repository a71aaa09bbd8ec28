"""The persistent shell, on every backend of the conformance suite (tests/runtimes.py):
the fake, runc, runsc and Podman, through the `Sandbox` interface."""

from __future__ import annotations

import time
import tracemalloc

import anyio
import pytest

from orsbox.sandbox import Sandbox, SandboxBackend, SandboxLimits, SandboxSpec
from tests.runtimes import INITS, BackendUnderTest
from tests.sandbox.conftest import BASE_IMAGE
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.anyio, pytest.mark.conformance]


async def running(under_test: BackendUnderTest, sandbox: Sandbox, *commands: str) -> bool:
    """Every one of `commands` shows in the sandbox's process table."""
    table = await under_test.processes(sandbox)
    return all(command in table for command in commands)


async def at_most(under_test: BackendUnderTest, sandbox: Sandbox, lines: int) -> bool:
    """The process table (header included) is down to `lines` lines."""
    return len((await under_test.processes(sandbox)).splitlines()) <= lines


async def test_state_persists_between_calls(sandbox: Sandbox) -> None:
    setup = (
        "export GREETING=hello; cd /tmp; mkdir -p deep/er && cd deep/er; "
        'greet() { echo "$GREETING $1"; }; declare -A colours=([sky]=blue); declare -i n=41'
    )
    assert (await sandbox.shell(setup)).exit_code == 0
    result = await sandbox.shell(
        "echo $GREETING; pwd; greet world; echo ${colours[sky]}; n+=1; echo $n"
    )
    assert result.output == "hello\n/tmp/deep/er\nhello world\nblue\n42\n"
    assert result.exit_code == 0
    # a backend whose shell runs on this host made the folder in the host's /tmp
    assert (await sandbox.shell("cd / && rm -rf /tmp/deep")).exit_code == 0


async def test_exit_codes_stderr_and_syntax_errors(sandbox: Sandbox) -> None:
    result = await sandbox.shell("echo out; echo err >&2; echo out2; false")
    assert (result.output, result.exit_code) == ("out\nerr\nout2\n", 1)
    broken = await sandbox.shell("echo 'unterminated")
    assert broken.exit_code == 2 and "unexpected EOF" in broken.output
    assert (await sandbox.shell("echo still here")).output == "still here\n"
    assert (await sandbox.shell("(exit 7)")).exit_code == 7


async def test_exit_restarts_the_shell(sandbox: Sandbox) -> None:
    result = await sandbox.shell("exit 3")
    assert result.exit_code == 3
    assert "fresh shell" in result.output
    assert (await sandbox.shell("echo ok")).output == "ok\n"


async def test_background_jobs_return_at_once(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    start = time.monotonic()
    result = await sandbox.shell("sleep 100 & nohup sleep 101 >/dev/null 2>&1 & echo started")
    assert time.monotonic() - start < 1.0
    assert result.output == "started\n"
    # a job forked may not have run `sleep` yet
    await wait_until_async(lambda: running(under_test, sandbox, "sleep 100", "sleep 101"), 10, 0.05)


async def test_timeout_kills_everything_the_command_started(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    await sandbox.shell("export KEPT=yes; sleep 200 &")  # an earlier job: must survive
    command = (
        "bash -c 'trap \"\" TERM; sleep 301' & "  # a child that ignores SIGTERM
        "( setsid bash -c 'trap \"\" TERM; sleep 302' & ) ; "  # double-forked, own session
        "sleep 300"
    )
    start = time.monotonic()
    result = await sandbox.shell(command, timeout_s=2)
    assert time.monotonic() - start < 3.0
    assert result.timed_out and result.exit_code is None
    assert "timed out" in result.output
    ps = await under_test.processes(sandbox)
    for leftover in ("sleep 300", "sleep 301", "sleep 302"):
        assert leftover not in ps, ps
    under_test.differs("timeout-keeps-state")
    assert "sleep 200" in ps
    after = await sandbox.shell("echo $KEPT")
    # bash may first report the killed background job ("... Killed  bash -c ...")
    assert after.output.endswith("yes\n") and after.exit_code == 0


async def test_timeout_kills_late_and_double_forks_under_load(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    """The timeout sweep races a loaded container: CPU hogs (the sandbox has one CPU),
    a loop that forks on and on, forks that come due around the deadline, double forks
    in their own sessions, and the rest of the command line, which the shell runs after
    the timeout (`sleep 300; sleep 305 & ...`). All of it dies; the shell, its state and
    an earlier background job survive."""
    await sandbox.shell("export KEPT=yes; sleep 200 &")
    command = "\n".join(
        [
            "for i in 1 2 3; do (exec -a orsbox-hog bash -c 'while :; do :; done') & done",
            "(while :; do setsid sleep 304 & sleep 0.02; done) &",
            "for d in 1.9 1.95 2 2.05 2.1; do (sleep $d; setsid sleep 303 &) & done",
            "bash -c 'trap \"\" TERM; sleep 301' & ( setsid bash -c 'trap \"\" TERM; sleep 302' & )",
            "sleep 300; sleep 305 & ( setsid sleep 306 & )",
        ]
    )
    start = time.monotonic()
    result = await sandbox.shell(command, timeout_s=2)
    assert time.monotonic() - start < 4.0
    assert result.timed_out and result.exit_code is None
    assert "timed out" in result.output and "restarted" not in result.output, result.output
    ps = await under_test.processes(sandbox)
    for leftover in ("orsbox-hog", *(f"sleep {n}" for n in range(300, 307))):
        assert leftover not in ps, ps
    under_test.differs("timeout-keeps-state")
    after = await sandbox.shell("echo $KEPT")
    assert after.output.endswith("yes\n") and after.exit_code == 0
    under_test.differs("sighup-to-shell-group")
    assert "sleep 200" in ps


async def test_a_busy_shell_is_killed_and_restarted(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    under_test.differs("shell-messages")
    start = time.monotonic()
    result = await sandbox.shell("while :; do :; done", timeout_s=1)
    assert time.monotonic() - start < 3.0
    assert result.timed_out and result.exit_code is None
    assert "restarted" in result.output
    assert (await sandbox.shell("echo ok")).output == "ok\n"


async def test_restart_shell_ends_a_running_command(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    under_test.differs("shell-messages")
    async with anyio.create_task_group() as tg:

        async def stuck() -> None:
            result = await sandbox.shell("sleep 200", timeout_s=60)
            assert result.exit_code is None and "restarted" in result.output

        tg.start_soon(stuck)
        await wait_until_async(lambda: running(under_test, sandbox, "sleep 200"), 10)
        with anyio.fail_after(5):
            await sandbox.restart_shell()
    assert (await sandbox.shell("echo ok")).output == "ok\n"
    assert "sleep 200" not in await under_test.processes(sandbox)


async def test_restart_shell(under_test: BackendUnderTest, sandbox: Sandbox) -> None:
    await sandbox.shell("export X=1; sleep 250 &")
    await sandbox.restart_shell()
    assert (await sandbox.shell("echo ${X:-unset}")).output == "unset\n"
    assert "sleep 250" not in await under_test.processes(sandbox)


async def until_listed(
    under_test: BackendUnderTest, sandbox: Sandbox, sleeps: tuple[int, ...]
) -> None:
    """Until `sleep N` runs for each N: a background chain (`setsid bash -c 'sleep N'`,
    `env -i sleep N`) may not have become its sleep yet when the call that started it
    answers."""

    async def all_started() -> bool:
        listed = await under_test.processes(sandbox)
        return all(f"sleep {n}" in listed for n in sleeps)

    await wait_until_async(all_started, 10, 0.05, f"sleeps {sleeps} started")


async def test_restart_shell_kills_what_escaped_the_shell_but_not_execs(
    under_test: BackendUnderTest,
    sandbox: Sandbox,
) -> None:
    """A double fork that called setsid has left the shell's tree and session; restart
    still finds it. A one-off exec's daemon (an environment's setup starting a service)
    is not the shell's and lives on."""
    await sandbox.exec("(setsid sleep 261 > /dev/null 2>&1 &)")
    await sandbox.shell("(setsid sleep 262 > /dev/null 2>&1 &); (setsid bash -c 'sleep 263' &)")
    await until_listed(under_test, sandbox, (261, 262, 263))
    await sandbox.restart_shell()
    ps = await under_test.processes(sandbox)
    assert "sleep 261" in ps
    assert "sleep 262" not in ps and "sleep 263" not in ps, ps


async def test_kill_processes_kills_everything_the_agent_started(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    """What a grader runs first: the shell's jobs, escaped orphans, one-off commands'
    daemons and a process that cleared its environment all die; the sandbox and a
    fresh shell still work."""
    under_test.differs("cleared-environment")
    await sandbox.exec("(setsid sleep 271 > /dev/null 2>&1 &)")
    await sandbox.shell("sleep 272 & (setsid env -i sleep 273 > /dev/null 2>&1 &)")
    await sandbox.shell("export KEPT=1; while :; do sleep 1; done > /dev/null 2>&1 &")

    await until_listed(under_test, sandbox, (271, 272, 273))
    assert await sandbox.kill_processes() >= 4
    after = await under_test.processes(sandbox)
    assert not any(f"sleep {n}" in after for n in (271, 272, 273)), after
    result = await sandbox.shell("echo ${KEPT:-fresh}")
    assert result.output == "fresh\n", result.output


async def test_kill_processes_ends_a_running_shell_command(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    under_test.differs("shell-messages")
    async with anyio.create_task_group() as tg:

        async def long_command() -> None:
            result = await sandbox.shell("echo started; sleep 280", timeout_s=60)
            assert result.exit_code is None and "killed" in result.output, result.output

        tg.start_soon(long_command)
        await wait_until_async(lambda: running(under_test, sandbox, "sleep 280"), 10)
        await sandbox.kill_processes()
    assert (await sandbox.shell("echo ok")).output == "ok\n"


# The token after the literal `\000` that starts the printer's format: matched on `000`
# alone, a token that began with 0 or held 000 came out cut (about one shell in eight).
SENTINEL_TOKEN = "$(declare -f __orsbox_p | sed -n 's/.*\\\\000\\([0-9a-f]*\\):.*/\\1/p')"


async def test_a_look_alike_sentinel_is_output(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    """A command can read the shell's token; the token followed by anything but a
    status and NUL is just output, and the call still ends at the real sentinel."""
    under_test.differs("sentinel")
    forged = "\\000%s:1234\\000 \\000%s:12x \\000%s:\\000 \\000%s:"
    command = f"t={SENTINEL_TOKEN}; printf '{forged}' $t $t $t $t; echo; echo after; false"
    result = await sandbox.shell(command)
    assert result.exit_code == 1, result.output
    assert result.output.endswith("after\n") and ":1234" in result.output, result.output
    assert (await sandbox.shell("echo next")).output == "next\n"


def peak_rss_kib() -> int:
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmHWM:"))
    return int(line.split()[1])


def reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


@pytest.mark.parametrize(
    "command",
    ["timeout 2 yes", "head -c 100000000 /dev/zero | tr '\\0' a"],
    ids=["yes-flood", "100MB-line"],
)
async def test_floods_are_capped_in_bounded_memory(sandbox: Sandbox, command: str) -> None:
    reset_peak_rss()
    before = peak_rss_kib()
    tracemalloc.start()
    try:
        result = await sandbox.shell(command, timeout_s=30, output_cap_bytes=64 * 1024)
        _, traced_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.truncated
    assert result.output_bytes >= 10_000_000
    assert 64 * 1024 <= len(result.output.encode()) <= 64 * 1024 + 200
    assert "bytes cut" in result.output
    assert traced_peak < 4 * 1024 * 1024
    assert peak_rss_kib() - before < 64 * 1024
    assert (await sandbox.shell("echo ok")).output == "ok\n"


async def test_binary_and_invalid_utf8_output(sandbox: Sandbox) -> None:
    result = await sandbox.shell("printf 'ok \\xff\\xfe\\x00 end\\n'; head -c 4096 /dev/urandom")
    assert result.exit_code == 0
    assert result.output.startswith("ok \ufffd\ufffd\x00 end\n")
    assert result.output_bytes == len("ok ") + 3 + len(" end\n") + 4096


async def test_fork_bomb_is_stopped(under_test: BackendUnderTest, backend: SandboxBackend) -> None:
    under_test.differs("limits")
    spec = SandboxSpec(image=BASE_IMAGE, limits=SandboxLimits(pids=128))
    sandbox = await backend.start(spec)
    result = await sandbox.shell(":(){ :|:& };:; sleep 30", timeout_s=2)
    assert result.timed_out
    after = await sandbox.shell("unset -f :; echo ok")
    assert after.output.endswith("ok\n")  # after the bomb's last "fork: retry" lines
    # the killed bomb's zombies are reaped by tini meanwhile
    await wait_until_async(
        lambda: at_most(under_test, sandbox, 8), 10, 0.2, "the bomb's processes reaped"
    )


async def test_memory_bomb_is_reported_and_the_sandbox_survives(
    under_test: BackendUnderTest, backend: SandboxBackend
) -> None:
    under_test.differs("limits")
    spec = SandboxSpec(image=BASE_IMAGE, limits=SandboxLimits(memory_bytes=256 * 1024**2))
    sandbox = await backend.start(spec)
    if under_test.has("oom"):  # gVisor: the allocation fails, nothing is killed
        result = await sandbox.shell('python3 -c "b = bytearray(4 * 1024**3)"', timeout_s=30)
        assert result.exit_code == 1 and "MemoryError" in result.output, result
        assert sandbox.alive
        under_test.differs("oom")
    result = await sandbox.shell('python3 -c "b = bytearray(4 * 1024**3)"', timeout_s=30)
    assert result.oom_killed, result
    assert result.exit_code == 137
    assert "killed: out of memory" in result.output
    assert (await sandbox.shell("echo ok")).output == "ok\n"
    assert sandbox.alive


async def test_the_guest_is_the_containers_command_and_kill_processes_spares_it(
    under_test: BackendUnderTest, backend: SandboxBackend, sandbox: Sandbox
) -> None:
    """The guest runs as init's child, not as a `docker exec`; killing every process
    the sandbox's user started spares init, the guest and what was entered from
    outside (an operator's `docker exec`, parent pid 0)."""
    under_test.differs("no-container")
    assert await under_test.outside.execs(backend, sandbox) == []  # none needed to start it
    await under_test.outside.enter(backend, sandbox, ["sleep", "291"])
    await wait_until_async(lambda: running(under_test, sandbox, "sleep 291"), 10)
    table = await under_test.processes(sandbox)
    guest = [line.split() for line in table.splitlines() if "orsbox-guest" in line]
    assert any(fields[1] == "1" and fields[0] != "1" for fields in guest), table
    await sandbox.shell("sleep 292 &")
    await sandbox.kill_processes()
    after = await under_test.processes(sandbox)
    assert "sleep 291" in after and "sleep 292" not in after, after
    assert any(init in after for init in INITS) and "orsbox-guest" in after
    assert (await sandbox.shell("echo ok")).output == "ok\n"
