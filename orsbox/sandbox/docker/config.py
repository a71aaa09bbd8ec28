"""`DockerConfig`: sandboxes as containers of one engine serving the Docker API (Docker,
a private gVisor engine, Podman's service), and the rules its engine address follows.

Light on purpose: the factory imports it to read `ORSBOX_BACKEND`, so it imports neither
the docker SDK nor the backend (`create` does, when a backend is made).
"""

from __future__ import annotations

import ipaddress
import os
from typing import TYPE_CHECKING, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field

from orsbox.errors import SandboxError
from orsbox.sandbox.backend_config import BackendConfig
from orsbox.sandbox.diagnosis import EngineCheck

if TYPE_CHECKING:
    from orsbox.sandbox.docker.backend import DockerBackend

DEFAULT_ENGINE = "unix:///var/run/docker.sock"
# Runtime names that mean gVisor (see docs/gvisor.md): `runsc`, and `runsc-<variant>`
# for the same binary registered again with other runtimeArgs (`runsc-ptrace`).
GVISOR_RUNTIME = "runsc"


class DockerConfig(BackendConfig):
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
    egress_proxy_hosts_file: str | None = Field(
        default=None,
        description="a hosts file the allow-list proxy (squid's hosts_file) resolves names "
        "with before DNS; default: /etc/hosts",
    )

    flags: ClassVar[tuple[str, ...]] = ("runtime", "engine")
    title: ClassVar[str] = "Docker engine"
    sdk: ClassVar[tuple[str, ...]] = ("docker",)

    def create(
        self, *, server_id: str | None = None, start_concurrency: int | None = None
    ) -> DockerBackend:
        from orsbox.sandbox.docker.backend import DockerBackend

        return DockerBackend(server_id, config=self, start_concurrency=start_concurrency)

    def builder(self) -> DockerConfig | None:
        """The local engine (DOCKER_HOST, else the local socket) when this config names
        another: a private gVisor engine's builds reach no network (docs/gvisor.md)."""
        local = os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE
        if self.engine is None or self.engine == local:
            return None
        return DockerConfig(engine=local)

    def unreachable(self, error: Exception) -> EngineCheck:
        where = self.engine or os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE
        fix = "start one with `bash scripts/start-docker.sh` (it installs docker.io if needed)"
        if os.environ.get("DOCKER_HOST"):
            fix += f", or unset DOCKER_HOST / point it at a running engine (it is {where})"
        return EngineCheck(self.title, False, f"no Docker engine answers at {where}: {error}", fix)


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


def is_gvisor(runtime: str | None) -> bool:
    return runtime is not None and (
        runtime == GVISOR_RUNTIME or runtime.startswith(GVISOR_RUNTIME + "-")
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
