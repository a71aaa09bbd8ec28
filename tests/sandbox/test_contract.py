"""The sandbox contract (`orsbox.sandbox.base`), one suite for every backend: the fake
(host processes, `orsbox.sandbox.fake`), Docker with runc, with runsc, and Podman. Only
the `Sandbox` interface is used, so a new backend joins by a module of its own in
tests/under_test/ (with test_shell.py and test_exec_files.py on the same fixture).
Where a backend differs, the test skips naming the difference (tests/runtimes.py); what
a test does from outside the contract (a kill behind the backend's back) is the
backend's `Outside`."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from orsbox.errors import SandboxFileError, SandboxGone
from orsbox.sandbox import Sandbox, SandboxBackend, SandboxSpec
from tests.runtimes import BackendUnderTest
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.anyio, pytest.mark.conformance]


async def scratch(sandbox: Sandbox) -> str:
    """A fresh folder in the sandbox (its own TMPDIR)."""
    return (await sandbox.shell("mktemp -d")).output.strip()


async def running(sandbox: Sandbox, pattern: str) -> bool:
    return (await sandbox.exec(["pgrep", "-f", pattern])).exit_code == 0


def unique_sleep() -> str:
    return f"sleep {1000 + secrets.randbelow(8000)}"


async def test_shell_state_persists(sandbox: Sandbox) -> None:
    folder = await scratch(sandbox)
    setup = f'export GREETING=hello; cd {folder}; greet() {{ echo "$GREETING $1"; }}'
    assert (await sandbox.shell(setup)).exit_code == 0
    result = await sandbox.shell("echo $GREETING; pwd; greet world")
    assert result.output == f"hello\n{folder}\nhello world\n"


async def test_exit_codes_stderr_and_syntax_errors(sandbox: Sandbox) -> None:
    result = await sandbox.shell("echo out; echo err >&2; echo out2; false")
    assert (result.output, result.exit_code) == ("out\nerr\nout2\n", 1)
    broken = await sandbox.shell("echo 'unterminated")
    assert broken.exit_code == 2
    assert (await sandbox.shell("echo still here")).output == "still here\n"


async def test_exit_gives_a_fresh_shell(sandbox: Sandbox) -> None:
    result = await sandbox.shell("exit 3")
    assert result.exit_code == 3 and "fresh shell" in result.output
    assert (await sandbox.shell("echo ok")).output == "ok\n"


async def test_exec_argv_string_env_cwd_stdin(sandbox: Sandbox) -> None:
    folder = await scratch(sandbox)
    assert (await sandbox.exec(["printf", "%s|", "a b", "c"])).output == "a b|c|"
    result = await sandbox.exec("echo $X; pwd; cat", env={"X": "1"}, cwd=folder, stdin=b"in")
    assert (result.output, result.exit_code) == (f"1\n{folder}\nin", 0)
    assert (await sandbox.exec("exit 4")).exit_code == 4


async def test_shell_timeout_kills_the_tree(under_test: BackendUnderTest, sandbox: Sandbox) -> None:
    child, escapee = unique_sleep(), unique_sleep()
    command = f"bash -c 'trap \"\" TERM; {child}' & ( setsid {escapee} & ); sleep 300"
    result = await sandbox.shell(command, timeout_s=2)
    assert result.timed_out and result.exit_code is None
    assert "timed out" in result.output
    assert not await running(sandbox, child) and not await running(sandbox, escapee)
    assert (await sandbox.shell("echo ok")).output.endswith("ok\n")
    under_test.differs("timeout-keeps-state")
    await sandbox.shell("export KEPT=1")
    await sandbox.shell("sleep 300", timeout_s=1)
    assert (await sandbox.shell("echo $KEPT")).output.endswith("1\n")


async def test_exec_timeout_kills_its_tree(sandbox: Sandbox) -> None:
    child = unique_sleep()
    result = await sandbox.exec(f"( setsid {child} & ); sleep 300", timeout_s=1)
    assert result.timed_out and result.exit_code is None
    await wait_until_async(lambda: _gone(sandbox, child), 10, 0.1, "the exec's tree killed")


async def _gone(sandbox: Sandbox, pattern: str) -> bool:
    return not await running(sandbox, pattern)


async def test_output_is_capped(sandbox: Sandbox) -> None:
    for run in (sandbox.shell, sandbox.exec):
        result = await run("seq 1 100000", output_cap_bytes=1000)
        assert result.truncated and len(result.data) < 1200
        assert result.output.startswith("1\n2\n") and result.output.endswith("100000\n")
        assert result.output_bytes == len("\n".join(map(str, range(1, 100001)))) + 1


async def test_binary_and_large_files_round_trip(sandbox: Sandbox) -> None:
    folder = await scratch(sandbox)
    binary = bytes(range(256)) * 4
    await sandbox.write_file(f"{folder}/a dir/bin file", binary)
    assert await sandbox.read_file(f"{folder}/a dir/bin file") == binary
    large = secrets.token_bytes(20 * 1024**2)
    await sandbox.write_file(f"{folder}/large", large)
    assert await sandbox.read_file(f"{folder}/large") == large
    assert (await sandbox.shell(f"stat -c %s {folder}/large")).output == f"{len(large)}\n"


async def test_file_errors(sandbox: Sandbox) -> None:
    folder = await scratch(sandbox)
    with pytest.raises(SandboxFileError, match="no such file"):
        await sandbox.read_file(f"{folder}/missing")
    with pytest.raises(SandboxFileError, match="is a directory"):
        await sandbox.read_file(folder)
    await sandbox.write_file(f"{folder}/f", b"x" * 100)
    with pytest.raises(SandboxFileError, match="too large"):
        await sandbox.read_file(f"{folder}/f", max_bytes=10)


async def test_copy_in(sandbox: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.txt").write_text("inner")
    (tmp_path / "top.bin").write_bytes(b"\x00\xff")
    folder = await scratch(sandbox)
    await sandbox.copy_in(tmp_path, f"{folder}/in")
    assert await sandbox.read_file(f"{folder}/in/sub/inner.txt") == b"inner"
    assert await sandbox.read_file(f"{folder}/in/top.bin") == b"\x00\xff"


async def test_restart_and_kill_processes(sandbox: Sandbox) -> None:
    job = unique_sleep()
    await sandbox.shell(f"export GONE=1; {job} &")
    await wait_until_async(lambda: running(sandbox, job), 10, 0.05, "the job started")
    await sandbox.restart_shell()
    assert (await sandbox.shell("echo x${GONE}x")).output == "xx\n"
    job = unique_sleep()
    await sandbox.shell(f"( setsid {job} & )")
    await wait_until_async(lambda: running(sandbox, job), 10, 0.05, "the escapee started")
    assert await sandbox.kill_processes() >= 1
    assert not await running(sandbox, job)
    assert (await sandbox.shell("echo ok")).output == "ok\n"


async def test_close_is_final_and_idempotent(backend: SandboxBackend) -> None:
    sandbox = await backend.start(SandboxSpec(image="orsbox/base:latest", session_id="close"))
    assert sandbox.alive
    await sandbox.close()
    await sandbox.close()
    assert not sandbox.alive
    with pytest.raises(SandboxGone, match="closed"):
        await sandbox.shell("echo hi")
    assert sandbox.id not in {info.id for info in await backend.list()}


async def test_a_sandbox_killed_from_outside_is_gone(
    under_test: BackendUnderTest, backend: SandboxBackend, sandbox: Sandbox
) -> None:
    await under_test.outside.kill(backend, sandbox)
    await wait_until_async(lambda: not sandbox.alive, 10, 0.05, "the sandbox saw its death")
    with pytest.raises(SandboxGone, match="gone"):
        await sandbox.shell("echo hi")
    with pytest.raises(SandboxGone):
        await sandbox.read_file("/etc/hostname")
