"""What each backend says it can do (`SandboxBackend.capabilities`), held against what it
does: on the fake, runc, runsc and Podman (`tests/runtimes.py`). The server's policy and
the CLI ask these answers instead of the backend's kind (tests/test_layering.py keeps it
so), so a wrong answer would refuse what works or start what cannot."""

from __future__ import annotations

import pytest

from orsbox.errors import SandboxStartError
from orsbox.sandbox import Sandbox, SandboxBackend, SandboxLimits, SandboxSpec
from orsbox.sandbox.capabilities import EVERY_NETWORK_MODE
from orsbox.sandbox.pool import WarmPool
from tests.runtimes import BackendUnderTest

pytestmark = [pytest.mark.anyio, pytest.mark.conformance]

BASE_IMAGE = "orsbox/base:latest"
# who -> (isolated, network modes, switches its network, chooses a runtime, snapshots)
EXPECTED = {
    "fake": (False, {"host"}, False, False, False),
    "runc": (True, EVERY_NETWORK_MODE, True, True, True),
    "gVisor": (True, {False}, False, True, True),
    # no guarded network (orsbox/sandbox/docker/podman.py); Podman's API ignoring a
    # runtime is found out at the first start that asks for one (test_podman.py)
    "Podman": (True, {False, "host"}, False, True, True),
}


async def test_the_answers_are_the_documented_ones(
    under_test: BackendUnderTest, backend: SandboxBackend
) -> None:
    caps = backend.capabilities
    answered = (caps.isolated, caps.network_modes, caps.switch_network, caps.runtime_choice)
    assert (*answered, caps.snapshots) == EXPECTED[under_test.who]
    assert caps.snapshots == (backend.snapshots is not None)


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
