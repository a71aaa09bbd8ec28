"""The skeleton's backend: start, list, sweep and remove pods (none are)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orsbox.sandbox.base import SandboxBackend, SandboxInfo, SandboxSpec
from orsbox.sandbox.capabilities import BackendCapabilities
from tests.skeleton_backend.images import SkeletonImages
from tests.skeleton_backend.sandbox import SkeletonSandbox

if TYPE_CHECKING:
    from tests.skeleton_backend import SkeletonConfig


class SkeletonBackend(SandboxBackend):
    capabilities: BackendCapabilities  # an attribute here, made from the config

    def __init__(self, config: SkeletonConfig, server_id: str | None = None) -> None:
        self.config = config
        self.server_id = server_id or "skeleton"
        self.capabilities = BackendCapabilities(
            isolated=True,
            network_modes=frozenset({False}),
            switch_network=False,
            runtime_choice=config.runtime_class is not None,
            snapshots=False,
            runtime=config.runtime_class,
        )
        self._images = SkeletonImages()

    @property
    def images(self) -> SkeletonImages:
        return self._images

    async def start(self, spec: SandboxSpec) -> SkeletonSandbox:
        # The guest's part is neutral: attach to the pod (`kubectl attach -i`), then
        # `orsbox.sandbox.guest.start.start_guest(sock, name,
        # sleep_after_s=self.config.guest_sleep_after_s)`, and for exec(user=...)
        # `SubGuests(channel, name, start_as)` with `start_as` a `kubectl exec -i`.
        raise NotImplementedError("create a pod, wait until it runs, open its guest")

    async def list(self, *, all_servers: bool = False) -> list[SandboxInfo]:
        raise NotImplementedError("list pods by the owner labels")

    async def sweep(self) -> int:
        raise NotImplementedError("delete pods whose owner's lease ran out")

    async def describe(self) -> str:
        raise NotImplementedError("ask the API server its version")

    async def close(self) -> None:
        return None  # it started nothing
