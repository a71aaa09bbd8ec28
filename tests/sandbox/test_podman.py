"""What only Podman needs (orsbox/sandbox/docker/podman.py, docs/backends.md): its
Docker-compatible API ignores the runtime a container asks for, so the Docker backend
refuses a runtime there instead of starting a sandbox meant for gVisor under runc; and
its networks do not hold the egress guard, so a sandbox asking for one is refused
rather than started unguarded. (The rest of the contract on Podman is the conformance
suite's `podman` case.)"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from orsbox.errors import SandboxError, SandboxStartError
from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.config import DockerConfig
from orsbox.sandbox.docker.guarded import NETWORK
from tests.runtimes import PODMAN_ENGINE, runtime_available
from tests.sandbox.conftest import BASE_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.mark.parametrize(
    ("configured", "asked"), [("runsc", None), (None, "runsc")], ids=["config", "spec"]
)
async def test_a_runtime_is_refused_on_podman_not_ignored(
    base_image: str, configured: str | None, asked: str | None
) -> None:
    runtime_available("podman")
    backend = DockerBackend(config=DockerConfig(engine=PODMAN_ENGINE, runtime=configured))
    try:
        spec = SandboxSpec(image=BASE_IMAGE, limits=SandboxLimits(runtime=asked))
        with pytest.raises(
            SandboxStartError, match=r"Podman 4\.\S+, whose Docker API ignores the runtime"
        ):
            await backend.start(spec)
        assert await backend.list() == []
    finally:
        await backend.close()


@pytest.fixture
async def podman() -> AsyncIterator[DockerBackend]:
    runtime_available("podman")
    backend = DockerBackend(config=DockerConfig(engine=PODMAN_ENGINE))
    yield backend
    await backend.close()


@pytest.mark.parametrize("network", [True, "allowlist"])
async def test_a_network_is_refused_on_podman_not_started_unguarded(
    base_image: str, podman: DockerBackend, network: bool | str
) -> None:
    """Podman's networks do not hold the egress guard (orsbox/sandbox/docker/podman.py):
    a sandbox asking for one is refused at start, naming Podman, and nothing is made."""
    hosts = ("deb.debian.org",) if network == "allowlist" else ()
    spec = SandboxSpec(image=BASE_IMAGE, limits=SandboxLimits(network=network, allowed_hosts=hosts))
    with pytest.raises(SandboxStartError, match=r"on Podman 4\.\S+ has no network but the host's"):
        await podman.start(spec)
    assert await podman.list() == []
    networks = podman.engine.client.api.networks(names=[NETWORK])
    assert not [n for n in networks if n.get("Name") == NETWORK]
    caps = podman.capabilities  # known now: the engine has answered
    assert (caps.gives_network(network), caps.switch_network) == (False, False)  # type: ignore[arg-type]
    assert "(Podman 4." in caps.describe_network()


async def test_a_running_sandbox_s_network_is_not_switched_on_podman(
    base_image: str, podman: DockerBackend
) -> None:
    sandbox = await podman.start(SandboxSpec(image=BASE_IMAGE))
    try:
        with pytest.raises(SandboxError, match="has no network but the host's"):
            await sandbox.set_network(True)
        assert (await sandbox.shell("ls /sys/class/net")).output == "lo\n"
    finally:
        await sandbox.close()
    with pytest.raises(SandboxError, match="has no network but the host's"):
        await podman.prepare_network()  # a server allowing the network: logged, not fatal
