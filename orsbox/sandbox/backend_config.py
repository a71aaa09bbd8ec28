"""What every backend's configuration is: the configuration half of the contract.

Each backend has one pydantic model, subclassing `BackendConfig` with a `type` literal
tag, in its own package (Docker: `orsbox.sandbox.docker.config`). The model knows its
backend (`create`, which imports the backend's heavy modules only then), the options
the CLI offers as flags for it (`flags`: `orsbox serve --runtime runsc` is Docker's
`runtime` field) and what `orsbox doctor` calls what runs its sandboxes (`title`,
`unreachable`). So the factory (`orsbox.sandbox.config`) lists the config classes and
nothing outside a backend's package names its options, its engine or its fixes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from orsbox.sandbox.diagnosis import EngineCheck

if TYPE_CHECKING:
    from orsbox.sandbox.base import SandboxBackend, SandboxLimits


class ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DefaultLimits(ConfigModel):
    """The operator's limits for sandboxes whose environment does not set its own: each
    field given here replaces `SandboxLimits`' default, never a value the environment
    chose (the policy, not these, bounds what environments may ask for)."""

    memory_bytes: int | None = Field(default=None, gt=0, description="hard memory limit")
    cpus: float | None = Field(default=None, gt=0)
    pids: int | None = Field(default=None, gt=8, description="max processes/threads")
    disk_bytes: int | None = Field(default=None, gt=0, description="writable folders' bound")

    def apply(self, limits: SandboxLimits) -> SandboxLimits:
        """`limits` with these defaults where the environment left a field unset."""
        given = self.model_dump(exclude_none=True)
        unset = {k: v for k, v in given.items() if k not in limits.model_fields_set}
        return limits.model_copy(update=unset) if unset else limits


class BackendConfig(ConfigModel):
    """One backend's configuration. A subclass sets `type` to a `Literal` of its name
    (the tag `ORSBOX_BACKEND='{"type": ...}'` chooses it by) and implements `create`."""

    type: str

    # fields `orsbox serve` and `orsbox run` take as flags (`--engine`, `--runtime`),
    # their help the field's description: the flags and ORSBOX_BACKEND never drift apart
    flags: ClassVar[tuple[str, ...]] = ()
    # what runs this backend's sandboxes, in `orsbox doctor`'s first line
    title: ClassVar[str] = "sandbox backend"

    @classmethod
    def tag(cls) -> str:
        """The `type` value that names this backend."""
        return str(cls.model_fields["type"].default)

    def create(
        self, *, server_id: str | None = None, start_concurrency: int | None = None
    ) -> SandboxBackend:
        """The backend this config describes. Raises `SandboxError` for a config that
        cannot work (say, an engine address it cannot use), at startup."""
        raise NotImplementedError(f"{type(self).__name__}.create")

    def builder(self) -> BackendConfig | None:
        """Another backend to build this one's missing images on, when this one's own
        builds reach no network (`ImageStore.offline_builds`), for copying them here
        after; None: none."""
        return None

    def unreachable(self, error: Exception) -> EngineCheck:
        """`orsbox doctor`'s answer, with a fix, when the backend cannot be made or does
        not answer (`error`)."""
        return EngineCheck(self.title, False, str(error))
