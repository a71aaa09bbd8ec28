"""The operator's options, applied once in front of any backend.

`image_map`, `default_limits` and `allow_runtimes` are fields of every backend's config
(`BackendConfig`), and the factory (`orsbox.sandbox.config.create_backend`) puts
`OperatorOptions` in front of the backend it makes whenever the config gives one of
them: every sandbox starts from its image as the map rewrites it (a pull fetches it
under that name too), with the operator's default limits where its environment set
none, and the runtimes the operator allows are offered in the backend's `capabilities`
where it chooses a runtime per sandbox at all (the server's policy reads them there).
So a backend never reads these three itself, and a new one honours them with no line of
its own. What the backend alone can do with an option stays its own:
`guest_sleep_after_s` reaches the guest it starts, `egress_allow` the guard of the
networks it gives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from orsbox.sandbox.backend_config import BackendConfig
from orsbox.sandbox.base import BackendWrapper, Sandbox, SandboxBackend, SandboxSpec
from orsbox.sandbox.capabilities import BackendCapabilities
from orsbox.sandbox.image_map import ImageMap


def gives_options(config: BackendConfig) -> bool:
    """The config sets an option `OperatorOptions` applies (else it would change nothing)."""
    return bool(
        config.image_map
        or config.allow_runtimes
        or config.default_limits.model_dump(exclude_none=True)
    )


class OperatorOptions(BackendWrapper):
    """`backend` with `config`'s image map, default limits and runtime allow-list."""

    def __init__(self, backend: SandboxBackend, config: BackendConfig) -> None:
        super().__init__(backend)
        self.image_map = ImageMap.parse(config.image_map)
        self.default_limits = config.default_limits
        self.allow_runtimes = tuple(config.allow_runtimes)

    @property
    def capabilities(self) -> BackendCapabilities:
        offered = self.backend.capabilities
        allowed = tuple(dict.fromkeys((*offered.allowed_runtimes, *self.allow_runtimes)))
        if allowed == offered.allowed_runtimes:
            return offered
        return dataclasses.replace(offered, allowed_runtimes=allowed)

    def configured(self, spec: SandboxSpec) -> SandboxSpec:
        """`spec` as the operator runs it: its image through the image map, and the
        default limits where the environment set none."""
        limits = self.default_limits.apply(spec.limits)
        image = self.mapped(spec.image)
        if limits is spec.limits and image == spec.image:
            return spec
        return spec.model_copy(update={"image": image, "limits": limits})

    def mapped(self, image: str) -> str:
        return self.image_map.rewrite(image) if self.image_map else image

    async def start(self, spec: SandboxSpec) -> Sandbox:
        return await self.backend.start(self.configured(spec))

    async def pull_image(self, image: str, progress: Callable[[str], None] | None = None) -> None:
        """Under the image map's name, as `start` looks for it."""
        await self.backend.pull_image(self.mapped(image), progress)
