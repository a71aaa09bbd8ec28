"""What each backend says it can do (`SandboxBackend.capabilities`), held against what it
does, on every backend of the conformance suite (`tests/runtimes.py`), with no row per
backend here: each answer is checked by doing what it promises, or by what the backend
documents (its differences). The server's policy and the CLI ask these answers instead
of the backend's kind (tests/test_layering.py keeps it so), so a wrong answer would
refuse what works or start what cannot. docs/backends.md tabulates them."""

from __future__ import annotations

import pytest

from orsbox.errors import SandboxError, SandboxStartError
from orsbox.sandbox import Sandbox, SandboxBackend, SandboxLimits, SandboxSpec
from orsbox.sandbox.capabilities import EVERY_NETWORK_MODE, NetworkMode
from orsbox.sandbox.pool import WarmPool
from tests.runtimes import BackendUnderTest

pytestmark = [pytest.mark.anyio, pytest.mark.conformance]

BASE_IMAGE = "orsbox/base:latest"
INTERFACES = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"  # gVisor has no /sys/class/net
PROXY = 'echo "${http_proxy:-none}"'


async def test_the_answers_are_the_documented_ones(
    under_test: BackendUnderTest, backend: SandboxBackend
) -> None:
    """Isolation is what the backend's differences say (the fake documents `limits`); a
    backend that saves snapshots has a snapshot store; a configured runtime is offered."""
    caps = backend.capabilities
    assert caps.isolated == (not under_test.has("limits"))
    assert caps.snapshots == (backend.snapshots is not None)
    assert caps.runtime is None or caps.offers_runtime(caps.runtime)
    assert not caps.switch_network or {True, False} <= caps.network_modes


async def test_each_network_mode_offered_is_had(
    under_test: BackendUnderTest, backend: SandboxBackend
) -> None:
    """A sandbox started with each mode offered has that network: none is loopback
    only, the guarded network an interface of its own (not the host's bridge), the host's
    the host's interfaces, an allow-list its proxy."""
    caps = backend.capabilities
    for mode in sorted(caps.network_modes, key=str):  # False, True, allowlist, host
        hosts = ("example.org",) if mode == "allowlist" else ()
        limits = SandboxLimits(network=mode, allowed_hosts=hosts)
        sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE, limits=limits))
        try:
            await _has_network(sandbox, mode, caps.bridge, under_test.has("limits"))
        finally:
            await sandbox.close()


async def _has_network(
    sandbox: Sandbox, mode: NetworkMode, bridge: str | None, unenforced: bool
) -> None:
    inside = (await sandbox.shell(INTERFACES)).output.split()
    if unenforced:  # the fake's are host processes: the host's network whatever is asked
        assert inside != ["lo"], inside
    elif mode is False:
        assert inside == ["lo"], inside
    elif mode == "allowlist":
        assert (await sandbox.shell(PROXY)).output.startswith("http://"), mode
    elif mode is True:
        assert inside != ["lo"] and (bridge is None or bridge not in inside), inside
    else:  # the host's: its bridge is up, a guarded sandbox (sorted first) having used it
        assert inside != ["lo"] and (bridge is None or bridge in inside), inside


async def test_a_network_is_switched_where_it_is_offered(
    under_test: BackendUnderTest, backend: SandboxBackend, sandbox: Sandbox
) -> None:
    """`switch_network`: a running sandbox gets a network and loses it again. Where it
    is not offered, a switch is refused as the contract says, never a silent no-op
    (gVisor's once changed nothing and said nothing)."""
    if not backend.capabilities.switch_network:
        under_test.differs("limits")  # the fake records what it is asked, enforcing none
        for network in (True, False):
            with pytest.raises(SandboxError):
                await sandbox.set_network(network)
        return
    await sandbox.set_network(True)
    assert (await sandbox.shell(INTERFACES)).output.split() != ["lo"]
    await sandbox.set_network(False)
    assert (await sandbox.shell(INTERFACES)).output.split() == ["lo"]


async def test_a_wrapper_gives_the_backend_s_answer(backend: SandboxBackend) -> None:
    assert WarmPool(backend, 0).capabilities == backend.capabilities


async def test_no_network_is_had_where_it_is_offered(
    backend: SandboxBackend, sandbox: Sandbox
) -> None:
    """The sandbox fixture asks for no network: a backend offering that gives only a
    loopback interface; the fake, which offers only the host's, shows the host's."""
    table = (await sandbox.exec("cat /proc/net/dev")).output.splitlines()[2:]
    interfaces = [line.split(":")[0].strip() for line in table]
    assert (interfaces == ["lo"]) == (False in backend.capabilities.network_modes)


async def test_each_network_mode_not_offered_is_refused_at_start(
    under_test: BackendUnderTest,
    backend: SandboxBackend,
) -> None:
    """(On runc every mode is offered: nothing to refuse.)"""
    under_test.differs("limits")  # the fake starts every mode, enforcing none
    for mode in EVERY_NETWORK_MODE - backend.capabilities.network_modes:
        hosts = ("example.org",) if mode == "allowlist" else ()
        limits = SandboxLimits(network=mode, allowed_hosts=hosts)
        with pytest.raises(SandboxStartError, match="no network"):
            await backend.start(SandboxSpec(image=BASE_IMAGE, limits=limits))
