"""Where an Inspect task's sandboxes start: a backend in this process, or a server.

One `Host` per distinct place (URL and token, or engine and runtime), shared by every
sample of every task in the eval and released at task cleanup. A local host builds a
config's Dockerfile once (`prepare`) and starts hardened sandboxes through orsbox's own
backend; a remote host starts API sandboxes on an orsbox server or cluster router,
where that server's policy, limits and reaper apply.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Protocol

import anyio

from orsbox.integrations.handles import LocalSandbox, RemoteSandbox, SandboxHandle
from orsbox.integrations.inspect.config import DEFAULT_IMAGE, ConfigRefused, OrsboxSandboxConfig
from orsbox.integrations.sandbox_client import SandboxApiClient
from orsbox.sandbox.base import SandboxBackend, SandboxSpec
from orsbox.sandbox.config import configured, create_backend, with_options
from orsbox.sandbox.images import ImageRecipe, ensure_built

LABEL = "orsbox.inspect.task"


class Host(Protocol):
    async def prepare(self) -> None: ...

    async def start(self, config: OrsboxSandboxConfig, task_name: str) -> SandboxHandle: ...

    def shell_command(self, handle: SandboxHandle, user: str | None) -> str | None: ...

    async def close(self) -> None: ...


_HOSTS: dict[tuple[Any, ...], Host] = {}


def host_for(config: OrsboxSandboxConfig) -> Host:
    """The shared host for this config's place, made on first use."""
    url = config.remote_url
    key = ("remote", url, config.bearer) if url else ("local", config.engine, config.runtime)
    if key not in _HOSTS:
        _HOSTS[key] = RemoteHost(config) if url else LocalHost(config)
    host = _HOSTS[key]
    if isinstance(host, LocalHost):
        host.want(config)
    return host


async def release_hosts() -> None:
    """Close every host (their backends remove any sandbox still running)."""
    hosts = list(_HOSTS.values())
    _HOSTS.clear()
    for host in hosts:
        await host.close()


def image_tag(dockerfile: Path) -> str:
    """A tag naming the Dockerfile's content and its folder, so a changed file builds
    anew and an unchanged one is built once."""
    digest = hashlib.sha256(str(dockerfile).encode() + dockerfile.read_bytes()).hexdigest()
    return f"orsbox-inspect/{dockerfile.parent.name.lower() or 'sandbox'}:{digest[:16]}"


class LocalHost:
    """Sandboxes in this process on the backend ORSBOX_BACKEND configures, as the
    server's (Docker on the local engine by default), from the factory with the config's
    engine and runtime laid over it."""

    def __init__(self, config: OrsboxSandboxConfig) -> None:
        options = with_options(configured(), engine=config.engine, runtime=config.runtime)
        self.backend: SandboxBackend = create_backend(options)
        self.dockerfiles: set[str] = set()
        self.built: dict[str, str] = {}
        self.lock = anyio.Lock()

    def want(self, config: OrsboxSandboxConfig) -> None:
        if config.dockerfile:
            self.dockerfiles.add(config.dockerfile)

    async def prepare(self) -> None:
        async with self.lock:
            for dockerfile in sorted(self.dockerfiles - set(self.built)):
                self.built[dockerfile] = await self._build(Path(dockerfile))

    async def _build(self, dockerfile: Path) -> str:
        """The Dockerfile's image, built once per host: always through the engine's build
        (its cache makes an unchanged one quick), as the tag names the Dockerfile's
        content but not the files it copies."""
        tag = image_tag(dockerfile)
        recipe = ImageRecipe(tag, dockerfile.parent, dockerfile, origin=str(dockerfile))
        await ensure_built(self.backend.images, recipe, lambda line: None, force=True)
        return tag

    async def start(self, config: OrsboxSandboxConfig, task_name: str) -> SandboxHandle:
        if config.dockerfile and config.dockerfile not in self.built:
            self.want(config)
            await self.prepare()
        image = self.built.get(config.dockerfile or "", config.image or DEFAULT_IMAGE)
        spec = SandboxSpec(
            image=image,
            limits=config.limits(),
            user=config.user,
            workdir=config.working_dir,
            env=config.env,
            labels={LABEL: task_name},
        )
        return LocalSandbox(await self.backend.start(spec))

    def shell_command(self, handle: SandboxHandle, user: str | None) -> str | None:
        if not isinstance(handle, LocalSandbox):
            return None
        return self.backend.login_command(handle.sandbox.id, user)

    async def close(self) -> None:
        await self.backend.close()


class RemoteHost:
    """API sandboxes on an orsbox server or cluster router."""

    def __init__(self, config: OrsboxSandboxConfig) -> None:
        assert config.remote_url is not None
        self.client = SandboxApiClient(config.remote_url, config.bearer)

    async def prepare(self) -> None:
        return None

    async def start(self, config: OrsboxSandboxConfig, task_name: str) -> SandboxHandle:
        if config.dockerfile:
            raise ConfigRefused(
                f"{config.dockerfile}: an orsbox server builds no images for its clients; "
                "build it on the server's engine (`orsbox build`) and name the image"
            )
        if config.runtime:
            raise ConfigRefused(
                "runtime: an orsbox server runs its sandboxes under its own runtime "
                "(its ORSBOX_BACKEND); leave runtime unset with a URL"
            )
        gib = config.memory_bytes / 1024**3
        settings = {
            "environment": f"inspect:{task_name}"[:100],
            "image": config.image or DEFAULT_IMAGE,
            "machine_size": f"{config.cpus:g}:{gib:g}",
            "env": config.env or None,
            "block_network": not config.network,
        }
        return RemoteSandbox(self.client, await self.client.create(settings))

    def shell_command(self, handle: SandboxHandle, user: str | None) -> str | None:
        return None

    async def close(self) -> None:
        await self.client.aclose()
