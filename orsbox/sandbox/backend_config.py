"""What every backend's configuration is: the configuration half of the contract.

Each backend has one pydantic model, subclassing `BackendConfig` with a `type` literal
tag, in its own package (Docker: `orsbox.sandbox.docker.config`). The model knows its
backend (`create`, which imports the backend's heavy modules only then), the options
the CLI offers as flags for it (`flags`: `orsbox serve --runtime runsc` is Docker's
`runtime` field) and what `orsbox doctor` calls what runs its sandboxes (`title`,
`unreachable`). So the factory (`orsbox.sandbox.config`) lists the config classes and
nothing outside a backend's package names its options, its engine or its fixes.

The operator's options every backend takes are fields of `BackendConfig` itself, so a
new backend accepts them without a line of its own: `image_map`, `default_limits` and
`allow_runtimes` are applied once, in front of whatever backend the factory makes
(`orsbox.sandbox.operator_options`); `guest_sleep_after_s` is handed to the guest by a
backend that starts one (`orsbox.sandbox.guest.start.start_guest`), and `egress_allow`
to the guard of a backend that gives sandboxes a network.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orsbox.sandbox.diagnosis import EngineCheck
from orsbox.sandbox.image_map import ImageMap

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
    (the tag `ORSBOX_BACKEND='{"type": ...}'` chooses it by) and implements `create`;
    the operator's options below are every backend's."""

    type: str
    allow_runtimes: list[str] = Field(
        default_factory=list,
        description="runtimes an environment may ask for in its limits, besides the configured "
        "one (a backend that chooses a runtime per sandbox)",
    )
    image_map: list[str] = Field(
        default_factory=list,
        description="image rewrite rules FROM=TO applied to every sandbox's image "
        "(see orsbox.sandbox.image_map), e.g. ubuntu:24.04=orsbox/debian:bookworm",
    )
    default_limits: DefaultLimits = Field(
        default_factory=DefaultLimits,
        description="limits for sandboxes whose environment sets none of its own, e.g. "
        '{"memory_bytes": 2147483648, "cpus": 2}',
    )
    egress_allow: list[str] = Field(
        default_factory=lambda: _env_list("ORSBOX_EGRESS_ALLOW"),
        description="CIDRs a networked sandbox may reach although they are private, "
        "link-local or the host's own (docs/network.md), e.g. an internal package mirror; "
        "default: ORSBOX_EGRESS_ALLOW, comma-separated",
    )
    guest_sleep_after_s: float | None = Field(
        default=None,
        gt=0,
        description="seconds a sandbox's guest may sit idle, nothing of the sandbox's "
        "running but its shell, before it sleeps: a native sleeper (84 KiB, shipped in "
        "orsbox's wheel or built with musl-gcc; else a waiting bash) replaces the python "
        "interpreter (3.4 MiB), answers plain shell calls itself and wakes the interpreter "
        "for anything else (docs/operating/sizing.md); default: never",
    )

    # fields `orsbox serve` and `orsbox run` take as flags (`--engine`, `--runtime`),
    # their help the field's description: the flags and ORSBOX_BACKEND never drift apart
    flags: ClassVar[tuple[str, ...]] = ()
    # what runs this backend's sandboxes, in `orsbox doctor`'s first line
    title: ClassVar[str] = "sandbox backend"
    # third-party packages only this backend's package imports (its engine's SDK), which
    # tests/test_layering.py keeps there: the rest of orsbox goes through the contract
    sdk: ClassVar[tuple[str, ...]] = ()

    @field_validator("egress_allow")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        return parse_cidrs(values)

    @field_validator("image_map")
    @classmethod
    def _rules(cls, rules: list[str]) -> list[str]:
        ImageMap.parse(rules)  # a malformed rule fails here, at startup
        return rules

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


def parse_cidrs(values: Iterable[str]) -> list[str]:
    """Validated, normalised CIDRs; raises ValueError naming a bad one."""
    cidrs = []
    for value in values:
        value = value.strip()
        if not value:
            continue
        try:
            cidrs.append(str(ipaddress.ip_network(value, strict=False)))
        except ValueError:
            raise ValueError(f"{value!r} is not an address or CIDR (e.g. 10.1.2.0/24)") from None
    return cidrs


def _env_list(name: str) -> list[str]:
    return [part for part in os.environ.get(name, "").split(",") if part.strip()]
