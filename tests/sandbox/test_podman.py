"""What only Podman needs: its Docker-compatible API ignores the runtime a container asks
for (docs/backends.md), so the Docker backend refuses a runtime there instead of
starting a sandbox meant for gVisor under runc. (The rest of the contract on Podman is
the conformance suite's `podman` case.)"""

from __future__ import annotations

import pytest

from orsbox.errors import SandboxStartError
from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.config import DockerConfig
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
