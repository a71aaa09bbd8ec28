"""One-off commands and files, on every backend of the conformance suite
(tests/runtimes.py): the fake, runc, runsc and Podman, through the `Sandbox` interface."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from orsbox.errors import SandboxFileError, SandboxStartError
from orsbox.sandbox import HostMount, Sandbox, SandboxBackend, SandboxLimits, SandboxSpec
from tests.runtimes import INITS, BackendUnderTest
from tests.sandbox.conftest import BASE_IMAGE
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.anyio, pytest.mark.conformance]


async def test_exec_argv_string_env_cwd_stdin(sandbox: Sandbox) -> None:
    assert (await sandbox.exec(["echo", "a b", "$HOME"])).output == "a b $HOME\n"
    result = await sandbox.exec(
        "echo $FOO; pwd; cat; exit 4", env={"FOO": "bar"}, cwd="/tmp", stdin=b"in\n"
    )
    assert (result.output, result.exit_code) == ("bar\n/tmp\nin\n", 4)
    missing = await sandbox.exec(["no-such-program"])
    assert missing.exit_code == 127


async def shell_sleeping(under_test: BackendUnderTest, sandbox: Sandbox) -> bool:
    return "sleep 4" in await under_test.processes(sandbox)


async def test_exec_is_outside_the_shell_and_concurrent_with_it(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    import anyio

    await sandbox.shell("export ONLY_IN_SHELL=1")
    assert (await sandbox.exec("echo ${ONLY_IN_SHELL:-no}")).output == "no\n"
    results: dict[str, object] = {}

    async def slow_shell() -> None:
        results["shell"] = await sandbox.shell("sleep 4; echo slow")

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow_shell)  # exec while the shell is busy with its `sleep 4`
        await wait_until_async(lambda: shell_sleeping(under_test, sandbox), 3)
        results["exec"] = await sandbox.exec("echo quick")
        results["read"] = await sandbox.read_file("/etc/hostname")
        assert "shell" not in results, "exec waited for the shell"
    assert results["shell"].output == "slow\n"  # type: ignore[attr-defined]


async def test_exec_timeout_kills_its_tree(under_test: BackendUnderTest, sandbox: Sandbox) -> None:
    start = time.monotonic()
    result = await sandbox.exec("bash -c 'trap \"\" TERM; sleep 310' & sleep 311", timeout_s=1)
    assert time.monotonic() - start < 2.5
    assert result.timed_out and result.exit_code is None and "timed out" in result.output
    ps = await under_test.processes(sandbox)
    assert "sleep 310" not in ps and "sleep 311" not in ps


async def test_exec_returns_when_the_process_exits_despite_background_children(
    sandbox: Sandbox,
) -> None:
    start = time.monotonic()
    result = await sandbox.exec("sleep 60 & echo done")
    assert result.output == "done\n" and time.monotonic() - start < 2


async def test_exec_as_another_user(under_test: BackendUnderTest, sandbox: Sandbox) -> None:
    under_test.differs("users")
    assert (await sandbox.exec(["id", "-un"])).output == "orsbox\n"
    assert (await sandbox.exec(["id", "-un"], user="root")).output == "root\n"


async def test_root_without_capabilities_writes_where_root_owns_the_folder(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    """What a grader does first (`orsbox.authoring.grader`): root, every capability
    dropped, makes its hidden folder in `/`, which root owns. (Podman's storage gave `/`
    mode 0555, where Docker gives 0755: root could not, and no grader ran.)"""
    under_test.differs("users")
    made = await sandbox.exec("mkdir -m 700 /grader && stat -c '%a %U' / /grader", user="root")
    assert (made.exit_code, made.output) == (0, "755 root\n700 root\n"), made.output
    assert (await sandbox.exec(["mkdir", "/not-mine"])).exit_code != 0  # the sandbox's user


async def test_exec_output_is_capped(sandbox: Sandbox) -> None:
    result = await sandbox.exec("head -c 1000000 /dev/zero", output_cap_bytes=1000)
    assert result.truncated and result.output_bytes == 1_000_000
    assert len(result.output.encode()) < 1200


async def test_files_round_trip_binary_and_paths_with_spaces(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    under_test.differs("paths")
    data = bytes(range(256)) * 64 + b"\r\n\x00"
    await sandbox.write_file("/workspace/a folder/deeper still/file name.bin", data)
    assert await sandbox.read_file("/workspace/a folder/deeper still/file name.bin") == data
    listing = await sandbox.shell("ls -l '/workspace/a folder/deeper still/'")
    assert "file name.bin" in listing.output
    await sandbox.write_file("relative.txt", b"rel", mode=0o600)
    assert (await sandbox.shell("stat -c %a /workspace/relative.txt")).output == "600\n"
    await sandbox.write_file("relative.txt", b"kept", mode=None)
    assert (await sandbox.shell("stat -c %a relative.txt; cat relative.txt")).output == "600\nkept"
    await sandbox.write_file("new.txt", b"", mode=None)
    assert (await sandbox.shell("stat -c %a new.txt")).output == "644\n"
    await sandbox.write_file("/tmp/empty", b"")
    assert await sandbox.read_file("/tmp/empty") == b""


async def test_large_file_round_trip(under_test: BackendUnderTest, sandbox: Sandbox) -> None:
    under_test.differs("paths")
    data = os.urandom(50 * 1024 * 1024)
    await sandbox.write_file("/tmp/big", data)
    assert await sandbox.read_file("/tmp/big") == data


async def test_file_errors_are_clear(under_test: BackendUnderTest, sandbox: Sandbox) -> None:
    under_test.differs("paths")
    cases = {
        "no such file: /nope/x": sandbox.read_file("/nope/x"),
        "is a directory: /tmp": sandbox.read_file("/tmp"),
        "permission denied: /etc/shadow": sandbox.read_file("/etc/shadow"),
        "permission denied: /etc/new.conf": sandbox.write_file("/etc/new.conf", b"x"),
        "is a directory: /workspace": sandbox.write_file("/workspace", b"x"),
        "file too large: /etc/passwd": sandbox.read_file("/etc/passwd", max_bytes=10),
    }
    for expected, call in cases.items():
        with pytest.raises(SandboxFileError) as info:
            await call
        assert expected in str(info.value)
    await sandbox.write_file("/tmp/plain", b"x")
    with pytest.raises(SandboxFileError, match="not a directory"):
        await sandbox.write_file("/tmp/plain/below", b"x")


async def test_copy_in(under_test: BackendUnderTest, sandbox: Sandbox, tmp_path: Path) -> None:
    under_test.differs("paths")
    (tmp_path / "sub").mkdir()
    (tmp_path / "top.txt").write_text("top")
    (tmp_path / "sub" / "inner.bin").write_bytes(b"\x00\x01")
    await sandbox.copy_in(tmp_path, "/workspace/project")
    assert await sandbox.read_file("/workspace/project/top.txt") == b"top"
    assert await sandbox.read_file("/workspace/project/sub/inner.bin") == b"\x00\x01"
    owner = await sandbox.shell("stat -c %U /workspace/project/sub/inner.bin")
    assert owner.output == "orsbox\n"


async def test_only_loopback_without_network(
    under_test: BackendUnderTest, sandbox: Sandbox
) -> None:
    under_test.differs("limits")
    under_test.differs("network")
    assert (await sandbox.shell("ls /sys/class/net")).output == "lo\n"


async def test_network_when_asked(under_test: BackendUnderTest, backend: SandboxBackend) -> None:
    under_test.differs("limits")
    if not backend.capabilities.gives_network(True):  # refused, not started without
        spec = SandboxSpec(image=BASE_IMAGE, limits=SandboxLimits(network=True))
        with pytest.raises(SandboxStartError, match="no network"):
            await backend.start(spec)
        under_test.differs("network")
        under_test.differs("guarded-network")
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE, limits=SandboxLimits(network=True)))
    interfaces = (await sandbox.shell("ls /sys/class/net")).output.split()
    assert "lo" in interfaces and len(interfaces) > 1


async def test_host_mounts_read_only_unless_asked(
    under_test: BackendUnderTest, backend: SandboxBackend, tmp_path: Path
) -> None:
    data, scratch = tmp_path / "data", tmp_path / "scratch"
    data.mkdir()
    (data / "set.txt").write_text("dataset")
    scratch.mkdir(mode=0o777)
    scratch.chmod(0o777)  # the sandbox's user is not root
    mounts = (
        HostMount(source=str(data), target="/data"),
        HostMount(source=str(scratch), target="/scratch", read_only=False),
    )
    under_test.differs("limits")
    spec = SandboxSpec(image=BASE_IMAGE, limits=SandboxLimits(mounts=mounts))
    sandbox = await backend.start(spec)
    assert await sandbox.read_file("/data/set.txt") == b"dataset"
    eacces = under_test.has("read-only-mount-error")
    refused = "permission denied" if eacces else "read-only file system"
    with pytest.raises(SandboxFileError, match=refused):
        await sandbox.write_file("/data/new.txt", b"x")
    await sandbox.write_file("/scratch/out.txt", b"written")
    assert (scratch / "out.txt").read_bytes() == b"written"


async def test_privileged_and_host_network_when_asked(
    under_test: BackendUnderTest, backend: SandboxBackend
) -> None:
    """What only an operator can allow (`orsbox.server.policy`) does reach the backend:
    the host's network shows the host's interfaces, among them the bridge the backend's
    own networks are behind (`capabilities.bridge`: up while a sandbox is on it)."""
    under_test.differs("limits")
    under_test.differs("privileged")
    bridge = backend.capabilities.bridge
    if bridge is not None:
        await backend.start(SandboxSpec(image=BASE_IMAGE, limits=SandboxLimits(network=True)))
    limits = SandboxLimits(privileged=True, network="host")
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE, limits=limits))
    bounding = (await sandbox.shell("grep CapBnd /proc/self/status")).output
    assert "CapBnd:\t0000000000000000" not in bounding, bounding
    inside = (await sandbox.shell("ls /sys/class/net")).output.split()
    assert inside != ["lo"], inside  # not a network namespace of its own
    assert bridge is None or bridge in inside, inside  # only the host has the bridge


async def test_hardening_defaults(under_test: BackendUnderTest, sandbox: Sandbox) -> None:
    under_test.differs("users")
    status = (await sandbox.shell("grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")).output
    assert "CapEff:\t0000000000000000" in status
    if not under_test.has("proc-status"):
        assert "NoNewPrivs:\t1" in status
    assert (await sandbox.shell("id -un; pwd")).output == "orsbox\n/workspace\n"
    assert (await sandbox.shell("ps -o comm= -p 1")).output.strip() in INITS


async def test_read_only_root(under_test: BackendUnderTest, backend: SandboxBackend) -> None:
    under_test.differs("limits")
    spec = SandboxSpec(image=BASE_IMAGE, limits=SandboxLimits(read_only_root=True))
    sandbox = await backend.start(spec)
    with pytest.raises(SandboxFileError, match="read-only file system"):
        await sandbox.write_file("/workspace/x", b"x")
    await sandbox.write_file("/tmp/x", b"x")
    assert (await sandbox.shell("cat /tmp/x")).output == "x"


IGNORED_BY_PYTHON = (1 << (13 - 1)) | (1 << (25 - 1))  # SIGPIPE, SIGXFSZ in SigIgn


async def test_commands_inherit_default_signals_and_only_their_own_descriptors(
    sandbox: Sandbox,
) -> None:
    """The guest starts commands with fork and exec itself (`guest/inside/spawn.py`, not
    `subprocess`): they must inherit what `Popen` gave them. SIGPIPE and SIGXFSZ at their
    default action (python ignores both, and an ignored signal stays ignored across
    exec), and no descriptor of the guest's: only 0-2 and the one `ls` lists with."""
    for run in (sandbox.exec, sandbox.shell):
        # `yes` killed by SIGPIPE ends silently; ignoring it, it would print an EPIPE error
        assert (await run("yes | head -2")).output == "y\ny\n"
        status = (await run("grep SigIgn /proc/self/status || true")).output.split()
        if status:  # gVisor's status has no SigIgn line
            assert int(status[1], 16) & IGNORED_BY_PYTHON == 0, (run, status)
        listed = (await run("ls /proc/self/fd")).output.split()
        assert set(listed) <= {"0", "1", "2", "3"}, (run, listed)
