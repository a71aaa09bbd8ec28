"""`SandboxLimits.writable_layer_bytes` and `privileges` against the real engine: a
sandbox writing past its bound is stopped with an error naming the bound (whether the
write came from a call or from a process in the background), one within it goes on;
the runtime's default capabilities only where asked for (the set the backend names:
`capabilities.runtime_default_caps`), orsbox's hardened default kept."""

from __future__ import annotations

import pytest

from orsbox.errors import SandboxGone
from orsbox.sandbox import SandboxBackend, SandboxLimits, SandboxSpec
from tests.runtimes import BackendUnderTest
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.conformance]

MiB = 1024 * 1024
BOUND = "past its storage bound of 8 MiB"


def bounded(image: str, bound_mib: int = 8) -> SandboxSpec:
    limits = SandboxLimits(writable_layer_bytes=bound_mib * MiB, privileges="runtime-default")
    return SandboxSpec(image=image, limits=limits, user="root", session_id="layer-bound")


async def test_a_call_writing_past_the_bound_ends_the_sandbox(
    under_test: BackendUnderTest, backend: SandboxBackend, base_image: str
) -> None:
    """The layer is measured after calls, off their path, and every few seconds: the
    writing call is answered, or, when a measurement caught the write while it ran, it
    fails naming the bound; either way the sandbox ends and every later call says why."""
    under_test.differs("limits")  # the fake: host processes, no layer, no capabilities
    sandbox = await backend.start(bounded(base_image))
    assert (await sandbox.shell("head -c 4M /dev/zero > /var/within; echo ok")).output == "ok\n"
    try:
        assert (await sandbox.shell("head -c 12M /dev/zero > /var/past; echo ok")).output == "ok\n"
    except SandboxGone as e:
        assert BOUND in str(e)
    await wait_until_async(lambda: not sandbox.alive, timeout_s=30)
    with pytest.raises(SandboxGone, match=BOUND) as raised:  # every later call says why
        await sandbox.shell("true")
    assert "storage_mb" in str(raised.value)

    async def removed() -> bool:
        return await backend.list() == []

    await wait_until_async(removed, timeout_s=30, message="the container removed")


async def test_a_grader_never_reads_a_sandbox_past_its_bound(
    under_test: BackendUnderTest, backend: SandboxBackend, base_image: str
) -> None:
    """Killing the agent's processes (what graders run first) measures in the
    foreground, whatever the background measurement has got to."""
    under_test.differs("limits")  # the fake: host processes, no layer, no capabilities
    sandbox = await backend.start(bounded(base_image))
    await sandbox.shell("head -c 12M /dev/zero > /var/past")
    with pytest.raises(SandboxGone, match=BOUND):
        await sandbox.kill_processes_listed()


async def test_a_background_writer_is_caught_between_calls(
    under_test: BackendUnderTest, backend: SandboxBackend, base_image: str
) -> None:
    under_test.differs("limits")  # the fake: host processes, no layer, no capabilities
    sandbox = await backend.start(bounded(base_image))
    await sandbox.shell("(sleep 0.5; head -c 12M /dev/zero > /var/past) >/dev/null 2>&1 &")
    await wait_until_async(lambda: not sandbox.alive, timeout_s=30)  # the periodic look
    with pytest.raises(SandboxGone, match=BOUND):
        await sandbox.shell("true")


async def test_a_sandbox_within_its_bound_is_not_ended(
    under_test: BackendUnderTest, backend: SandboxBackend, base_image: str
) -> None:
    under_test.differs("limits")  # the fake: host processes, no layer, no capabilities
    sandbox = await backend.start(bounded(base_image, bound_mib=64))
    for _ in range(3):
        await sandbox.shell("head -c 4M /dev/zero > /var/file-$RANDOM")
    assert sandbox.alive
    assert int((await sandbox.shell("du -sm /var | cut -f1")).output) >= 12


async def test_runtime_default_privileges_only_when_asked(
    under_test: BackendUnderTest, backend: SandboxBackend, base_image: str
) -> None:
    under_test.differs("limits")  # the fake: host processes, no layer, no capabilities
    hardened = await backend.start(SandboxSpec(image=base_image, user="root"))
    default = await backend.start(bounded(base_image, bound_mib=64))
    status = "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status"
    assert "CapEff:\t0000000000000000" in (await hardened.shell(status)).output
    opened = (await default.shell(status)).output
    caps = backend.capabilities.runtime_default_caps
    if not under_test.has("proc-status"):
        assert "NoNewPrivs:\t0" in opened
        assert caps is None or f"CapEff:\t{caps}" in opened, opened
    # root's capabilities at work: a file of another owner, changed by root
    chown = "touch /var/f && chown 1000:1000 /var/f && chmod 600 /var/f && cat /var/f; echo $?"
    assert (await default.shell(chown)).output.strip() == "0"
    assert (await hardened.shell(chown)).output.strip() != "0"
