"""Backend configuration: one pydantic model per backend, told apart by its `type` tag.

`Settings.backend` holds a `BackendConfig`: set it as JSON in `ORSBOX_BACKEND`
(`{"type": "docker", "runtime": "runsc"}`), in a TOML or JSON file (`load_config_file`),
or through the CLI flags derived from the same models (`orsbox serve --runtime runsc
--engine unix:///var/run/other.sock`). `create_backend(config)` builds the backend it
names; the backend's module is imported only then (the docker SDK is heavy).
"""

from __future__ import annotations

import ipaddress
import json
import os
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from orsbox.errors import SandboxError
from orsbox.sandbox.image_map import ImageMap

if TYPE_CHECKING:
    from orsbox.sandbox.base import SandboxBackend, SandboxLimits

DEFAULT_ENGINE = "unix:///var/run/docker.sock"
# Runtime names that mean gVisor (see docs/gvisor.md): `runsc`, and `runsc-<variant>`
# for the same binary registered again with other runtimeArgs (`runsc-ptrace`).
GVISOR_RUNTIME = "runsc"
T = TypeVar("T")


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DefaultLimits(_Config):
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


class DockerConfig(_Config):
    """Sandboxes as containers of one Docker engine."""

    type: Literal["docker"] = "docker"
    engine: str | None = Field(
        default=None,
        description="engine address: unix:///path, tcp://host:port (loopback only: the "
        "guest's stream is unencrypted) or ssh:// (refused; see engine_address); "
        "default: DOCKER_HOST, else the local socket",
    )
    runtime: str | None = Field(
        default=None,
        description="OCI runtime for every sandbox, e.g. runsc (gVisor); default: the "
        "engine's own (runc)",
    )
    allow_runtimes: list[str] = Field(
        default_factory=list,
        description="runtimes an environment may ask for in its limits, besides `runtime`",
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
    egress_proxy_hosts_file: str | None = Field(
        default=None,
        description="a hosts file the allow-list proxy (squid's hosts_file) resolves names "
        "with before DNS; default: /etc/hosts",
    )

    @field_validator("egress_allow")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        from orsbox.sandbox.docker.egress import parse_cidrs

        return parse_cidrs(values)

    @field_validator("image_map")
    @classmethod
    def _rules(cls, rules: list[str]) -> list[str]:
        ImageMap.parse(rules)  # a malformed rule fails here, at startup
        return rules


class FakeConfig(_Config):
    """The in-process fake (`orsbox.sandbox.fake`): host processes, no isolation; for
    fast unit tests only."""

    type: Literal["fake"] = "fake"


BackendConfig = Annotated[DockerConfig | FakeConfig, Field(discriminator="type")]
_ADAPTER: TypeAdapter[DockerConfig | FakeConfig] = TypeAdapter(BackendConfig)


def parse_config(data: object) -> DockerConfig | FakeConfig:
    """A config from its dict form (`type` chooses the model; docker when absent)."""
    if isinstance(data, dict) and "type" not in data:
        data = {**data, "type": "docker"}
    return _ADAPTER.validate_python(data)


def load_config_file(path: Path) -> DockerConfig | FakeConfig:
    """A backend config from a .toml or .json file (a TOML file may hold it under
    `[backend]`)."""
    text = path.read_text()
    data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    return parse_config(data.get("backend", data) if isinstance(data, dict) else data)


def engine_address(config: DockerConfig) -> str:
    """The engine address to connect to, or `SandboxError` saying why it cannot work.

    The guest talks over the raw socket of an attach, so the transport must hand over a
    plain socket: a unix socket does, so does unencrypted TCP (allowed to a loopback
    address only, as anyone who reaches it controls the engine). The docker SDK's TLS
    and SSH transports hand over wrapped sockets the guest channel cannot use, so they
    are refused at startup rather than at the first session."""
    address = config.engine or os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE
    parts = urlsplit(address)
    if parts.scheme in ("unix", "npipe"):
        return address
    if parts.scheme == "ssh":
        raise SandboxError(
            f"engine {address}: ssh:// is not supported (the sandbox guest needs a plain "
            "socket); forward the remote socket instead: `ssh -NL "
            "/tmp/remote-docker.sock:/var/run/docker.sock HOST` and use "
            "unix:///tmp/remote-docker.sock"
        )
    if parts.scheme in ("tcp", "http", "https"):
        tls = parts.scheme == "https" or os.environ.get("DOCKER_TLS_VERIFY") not in (None, "")
        if tls:
            raise SandboxError(
                f"engine {address}: TLS connections are not supported (the sandbox guest "
                "needs a plain socket); tunnel the engine's unix socket over ssh "
                "(`ssh -NL /tmp/remote-docker.sock:/var/run/docker.sock HOST`)"
            )
        if not _loopback(parts.hostname or ""):
            raise SandboxError(
                f"engine {address}: unencrypted tcp:// only to a loopback address (anyone "
                "who reaches it controls the engine); tunnel a remote engine over ssh"
            )
        return address
    raise SandboxError(f"engine {address}: unknown scheme {parts.scheme!r}")


def _env_list(name: str) -> list[str]:
    return [part for part in os.environ.get(name, "").split(",") if part.strip()]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_gvisor(runtime: str | None) -> bool:
    return runtime is not None and (
        runtime == GVISOR_RUNTIME or runtime.startswith(GVISOR_RUNTIME + "-")
    )


def with_engine_options(
    config: DockerConfig | FakeConfig, **given: str | None
) -> DockerConfig | FakeConfig:
    """`config` with the engine options given (`runtime`, `engine`: the CLI's flags) laid
    over it; they are Docker's, so another backend's config gives way to a Docker one."""
    given = {k: v for k, v in given.items() if v is not None}
    if not given:
        return config
    base = config if isinstance(config, DockerConfig) else DockerConfig()
    return base.model_copy(update=given)


def create_backend(
    config: DockerConfig | FakeConfig | None = None,
    *,
    server_id: str | None = None,
    start_concurrency: int | None = None,
) -> SandboxBackend:
    """The backend `config` describes (default: Docker on the default engine)."""
    config = config or DockerConfig()
    if isinstance(config, FakeConfig):
        from orsbox.sandbox.fake import FakeBackend

        return FakeBackend(server_id=server_id)
    from orsbox.sandbox.docker import DockerBackend

    return DockerBackend(server_id, config=config, start_concurrency=start_concurrency)


def with_backend(
    config: DockerConfig | FakeConfig | None, work: Callable[[SandboxBackend], Awaitable[T]]
) -> T:
    """`await work(backend)` on a backend made for `config`, from synchronous code (the
    CLI: its image store, its health); the backend is closed afterwards."""
    import anyio

    async def run() -> T:
        backend = create_backend(config)
        try:
            return await work(backend)
        finally:
            await backend.close()

    return anyio.run(run)
