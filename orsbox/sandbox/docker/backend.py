"""`DockerBackend`: starts sandbox containers, lists them, sweeps the ones of dead servers.

Start is: create (a missing image answers there, so there is no separate look-up), attach
and start in one go (the guest is the container's own command, see
`orsbox.sandbox.guest.loader`), send the guest's payload, say hello
(`orsbox.sandbox.guest.start`): three engine round trips and no `docker exec`. A
sub-guest for `exec(user=...)` is one `docker exec` of the same loader. A
start that fails or is cancelled half-way removes its container before raising, so
nothing is left behind. A sandbox with `disk_bytes` also gets bounded folders, planned
before the create and filled with the image's content after the hello (`disk.py`).

Starts run a bounded number at once; the rest wait their turn in arrival order. A start
is mostly engine and kernel work (runc, namespaces, cgroups), so on a small machine
fifty at once take longer each than fifty queued a few at a time, and starve the
server's event loop and every running sandbox of CPU meanwhile. The bound is measured
while starts queue (`orsbox.sandbox.start_limit`), unless fixed by `start_concurrency`.

Containers never outlive their server: the guest's dead-man's switch ends the container
when the server's socket closes (even on SIGKILL), `auto_remove` deletes it, and `sweep`
removes what a crash on a dead engine connection may still have left, judged by the
owner labels (`orsbox.sandbox.host.owner`).
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import logging
import os
import secrets
import shlex
import socket
import time
from typing import Any

import anyio
import docker

from orsbox.errors import ImageNotFound, SandboxError, SandboxStartError
from orsbox.sandbox.base import SandboxBackend, SandboxInfo, SandboxSpec
from orsbox.sandbox.capabilities import EVERY_NETWORK_MODE, BackendCapabilities
from orsbox.sandbox.diagnosis import EngineCheck
from orsbox.sandbox.docker.allowlist import AllowlistNetwork
from orsbox.sandbox.docker.config import DEFAULT_ENGINE, DockerConfig, engine_address, is_gvisor
from orsbox.sandbox.docker.diagnosis import engine_checks
from orsbox.sandbox.docker.disk import DiskPlan, DiskPlanner
from orsbox.sandbox.docker.engine import Engine
from orsbox.sandbox.docker.engine_limits import engine_limits, episode_cost
from orsbox.sandbox.docker.guarded import GuardedNetwork, network_vanished, sweep_host_state
from orsbox.sandbox.docker.image_store import DockerImages
from orsbox.sandbox.docker.images import build_hint
from orsbox.sandbox.docker.options import (
    RUNTIME_DEFAULT_CAPS,
    container_name,
    container_options,
    guest_memory_bounds,
)
from orsbox.sandbox.docker.podman import (
    PODMAN_NETWORK_MODES,
    is_podman,
    no_guarded_network,
    root_folder_archive,
)
from orsbox.sandbox.docker.sandbox import DockerSandbox
from orsbox.sandbox.docker.snapshots import DockerSnapshots
from orsbox.sandbox.docker.stream import DockerDemux
from orsbox.sandbox.guest.channel import ChannelClosed
from orsbox.sandbox.guest.payload import guest_payload
from orsbox.sandbox.guest.sleeper import sleeper_binary
from orsbox.sandbox.guest.start import SubGuests, start_guest
from orsbox.sandbox.host import owner as L
from orsbox.sandbox.host.checks import network_checks
from orsbox.sandbox.host.state import Swept
from orsbox.sandbox.host_limits import HostLimit, kernel_limits
from orsbox.sandbox.host_state import HostStateSwept
from orsbox.sandbox.images import BASE_IMAGE
from orsbox.sandbox.labels import label_value
from orsbox.sandbox.start_limit import StartLimit
from orsbox.sandbox.usage import ResourceUsage

log = logging.getLogger("orsbox.sandbox.docker")

ROOT_MODE_ATTEMPTS = 3  # `_give_root_dockers_mode` on a broken pipe
START_CONCURRENCY = 16  # where the measured limit begins (`start_limit.py`, BENCHMARKS.md)
HEALTH_FRESH_S = 2.0


def default_server_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class DockerBackend(SandboxBackend):
    def __init__(
        self,
        server_id: str | None = None,
        client: docker.DockerClient | None = None,
        *,
        config: DockerConfig | None = None,
        run_options: dict[str, Any] | None = None,
        start_concurrency: int | None = None,
    ) -> None:
        """`config` names the engine and the runtime (`orsbox.sandbox.config`); an
        engine address that cannot work raises `SandboxError` here, at startup.
        `run_options` override the container defaults (see `options.py`), e.g.
        `{"init": False}`. `start_concurrency` fixes how many sandboxes start at once;
        None (the default) starts at `START_CONCURRENCY` and adapts (the module
        docstring says why)."""
        self.server_id = server_id or default_server_id()
        self.config = config or DockerConfig()
        address = engine_address(self.config) if client is None else None
        self.engine = Engine(client, address)
        self._run_options = dict(run_options or {})
        self._sandboxes: dict[str, DockerSandbox] = {}
        self.start_limit = StartLimit(
            start_concurrency or START_CONCURRENCY, fixed=start_concurrency is not None
        )
        self._disk = DiskPlanner(self.engine, L.sandbox_labels(self.server_id, "probe", {}))
        self.snapshots: DockerSnapshots = DockerSnapshots(self.engine, self.server_id)
        self._images = DockerImages(self.engine)
        self.guarded = GuardedNetwork(self.engine, self.server_id, self.config.egress_allow)
        self.allowlist = AllowlistNetwork(
            self.engine,
            self.server_id,
            self.config.egress_allow,
            self.config.egress_proxy_hosts_file,
        )
        self._orphans: set[asyncio.Future[None]] = set()  # removals of cancelled creates
        guest_payload()  # compiled now, not on the event loop at the first start
        if self.config.guest_sleep_after_s is not None:
            sleeper_binary()  # built now, likewise (what a sleeping guest runs)

    @property
    def capabilities(self) -> BackendCapabilities:
        """As configured, and as the engine is once it has answered (the first engine
        call of any kind: a server's start-up sweep). Under gVisor a sandbox has no
        network at all (`runtime_for`); on Podman none but the host's (`podman.py`).
        An engine whose API ignores the runtime asked for (Podman) is found out at the
        first start that asks for one, and that start is refused."""
        gvisor = is_gvisor(self.config.runtime)
        podman = is_podman(self.engine.product)
        modes = EVERY_NETWORK_MODE
        if gvisor:
            modes = frozenset({False})
        elif podman:
            modes = PODMAN_NETWORK_MODES
        return BackendCapabilities(
            isolated=True,
            network_modes=modes,
            switch_network=not gvisor and not podman,
            runtime_choice=True,
            snapshots=True,
            runtime=self.config.runtime,
            engine=self.engine.product if podman else None,
            bridge=self.guarded.bridge if True in modes else None,
            runtime_default_caps=RUNTIME_DEFAULT_CAPS,
        )

    # -- start

    async def start(self, spec: SandboxSpec) -> DockerSandbox:
        try:
            async with self.start_limit.slot():
                return await self._start(spec)
        except (ImageNotFound, SandboxStartError):
            raise
        except (SandboxError, ChannelClosed) as e:
            raise SandboxStartError(f"could not start a sandbox from {spec.image}: {e}") from None

    async def _start(self, spec: SandboxSpec) -> DockerSandbox:
        """Start once more, whole, when another server removed the shared guarded
        network between this one's create and start (its last sandbox gone: see
        `guarded.py`); the failed attempt has removed its container."""
        try:
            return await self._start_once(spec)
        except SandboxError as e:
            if spec.limits.network is not True or not network_vanished(e, self.guarded.name):
                raise
            log.info("the guarded network vanished under a start; starting again: %s", e)
            return await self._start_once(spec)

    async def _start_once(self, spec: SandboxSpec) -> DockerSandbox:
        name = container_name(spec.session_id)
        labels = L.sandbox_labels(self.server_id, spec.session_id, spec.labels)
        try:
            disk = await self._disk_plan(spec)
            tmpfs = disk.tmpfs() if disk else None
            runtime = self.runtime_for(spec)
            if runtime is not None:
                await self._refuse_an_ignored_runtime(runtime)
            await self._refuse_a_network_not_offered(spec)
            network = await self._network_for(spec)
            options = container_options(
                spec, name, labels, self._run_options, tmpfs=tmpfs, runtime=runtime,
                network=network,
            )  # fmt: skip
            container_id = await self._create(options)
        except ImageNotFound:
            raise ImageNotFound(
                f"image {spec.image!r} not found; {build_hint(spec.image)}"
            ) from None
        sandbox: DockerSandbox | None = None
        try:
            await self._give_root_dockers_mode(container_id, options)
            if disk is not None:
                disk = await self._disk.fill_large(disk, container_id)
            sandbox = await self._start_created(
                container_id,
                name,
                layer_bound_bytes=spec.limits.writable_layer_bytes,
                memory=guest_memory_bounds(spec.limits, runtime),
                ends_itself=is_gvisor(runtime),
                network_refused=self._network_refused(runtime),
            )
            if spec.limits.network == "allowlist":
                await sandbox.use_proxy(spec.limits.allowed_hosts)
            if disk is not None:
                await seed(sandbox, disk)
            return sandbox
        except BaseException:
            with anyio.CancelScope(shield=True):
                if sandbox is not None:
                    await self._close_quietly(sandbox)
                else:
                    await self._remove_quietly(container_id)
            raise

    async def _network_for(self, spec: SandboxSpec) -> str | None:
        """The network a sandbox joins at start: the guarded one for outbound access,
        the allow-list one for a proxy (None: "none" or the host's)."""
        if spec.limits.network is True:
            return await self.guarded.ensure()
        if spec.limits.network == "allowlist":
            return await self.allowlist.ensure()
        return None

    async def _create(self, options: dict[str, Any]) -> str:
        """Create the container; a caller cancelled meanwhile leaves nothing behind.
        An anyio shield does not hold against a native `Task.cancel()` (how a deleted
        session's setup is stopped), so the create runs as a task of its own: when its
        caller is gone, the container it makes is removed as soon as it exists."""
        create = asyncio.ensure_future(self.engine.create(options))
        try:
            return await asyncio.shield(create)
        except asyncio.CancelledError:
            create.add_done_callback(self._remove_orphan)
            raise

    def _remove_orphan(self, create: asyncio.Future[str]) -> None:
        if create.cancelled() or create.exception() is not None:
            return
        task = asyncio.ensure_future(self._remove_quietly(create.result()))
        self._orphans.add(task)
        task.add_done_callback(self._orphans.discard)

    @property
    def images(self) -> DockerImages:
        return self._images

    async def describe(self) -> str:
        return f"{await self._product()} at {self.engine.address or 'DOCKER_HOST'}"

    def login_command(self, sandbox_id: str, user: str | None = None) -> str | None:
        who = ["--user", user] if user else []
        engine = ["-H", self.config.engine] if self.config.engine else []
        return shlex.join(["docker", *engine, "exec", "-it", *who, sandbox_id, "bash", "-l"])

    async def engine_checks(self) -> list[EngineCheck]:
        description, has_base = await self.describe(), await self.images.has(BASE_IMAGE)
        checks = functools.partial(engine_checks, self.engine.client, description, has_base)
        return await anyio.to_thread.run_sync(checks, self.config.runtime)

    async def host_limits(self) -> list[HostLimit]:
        """The kernel's limits at a container sandbox's cost, then the engine's own
        (its processes' open files, its cgroup's tasks, the guarded bridge's ports).
        Podman's own costs were not measured: it has the kernel's only."""
        podman = is_podman(await self._product())

        def read() -> list[HostLimit]:
            kernel = kernel_limits(episode_cost())
            if podman:
                return kernel
            return [*kernel, *engine_limits(self.engine.address or DEFAULT_ENGINE)]

        return await anyio.to_thread.run_sync(read)

    def runtime_for(self, spec: SandboxSpec) -> str | None:
        """The OCI runtime `spec` runs under: its own when it asks for one, else the
        configured one. gVisor runs with `--network=none` (docs/gvisor.md), so a spec
        that needs a network is refused there rather than started without one."""
        runtime = spec.limits.runtime or self.config.runtime
        if is_gvisor(runtime) and spec.limits.network:
            raise SandboxStartError(
                f"a sandbox under {runtime} (gVisor) has no network (the runtime runs "
                "with --network=none); run environments that need one under runc"
            )
        return runtime

    async def _refuse_a_network_not_offered(self, spec: SandboxSpec) -> None:
        """A sandbox asking for a network this engine cannot guard (Podman's, see
        `podman.py`) is refused, not started without the guard."""
        await self._product()
        refused = self._network_refused()
        if refused is not None and not self.capabilities.gives_network(spec.limits.network):
            raise SandboxStartError(refused)

    async def _refuse_an_ignored_runtime(self, runtime: str) -> None:
        """Podman's Docker-compatible API ignores the runtime a container asks for
        (docs/backends.md): a sandbox meant for gVisor would silently run under runc.
        Refused instead; the engine is asked what it is once."""
        product = await self._product()
        if is_podman(product):
            raise SandboxStartError(
                f"runtime {runtime}: the engine is {product}, whose Docker "
                "API ignores the runtime a container asks for; use a Docker engine for it"
            )

    async def _give_root_dockers_mode(self, container_id: str, options: dict[str, Any]) -> None:
        """On Podman, `/` gets the mode Docker gives it before the container starts, so
        root (no capabilities) can make a grader's folder there (`podman.py`). A
        read-only root is left as it is: nothing is written there on any engine."""
        if options.get("read_only") or not is_podman(await self._product()):
            return
        for attempt in range(ROOT_MODE_ATTEMPTS):
            try:
                await self.engine.put_archive(container_id, "/", root_folder_archive())
                return
            except SandboxError as e:
                # Podman's copier may close its pipe before the whole body is written
                # (seen under load: "write |1: broken pipe"); setting a mode is idempotent.
                if "broken pipe" not in str(e) or attempt == ROOT_MODE_ATTEMPTS - 1:
                    raise

    async def _product(self) -> str:
        """`Docker 28.2.2` or `Podman 4.3.1`, asked once."""
        return await self.engine.product_name()

    async def _disk_plan(self, spec: SandboxSpec) -> DiskPlan | None:
        if spec.limits.disk_bytes is None:
            return None
        return await self._disk.plan(spec, spec.limits.disk_bytes)

    async def _start_created(
        self,
        container_id: str,
        name: str,
        *,
        layer_bound_bytes: int | None = None,
        memory: dict[str, int | None] | None = None,
        ends_itself: bool = False,
        network_refused: str | None = None,
    ) -> DockerSandbox:
        sandbox: DockerSandbox | None = None

        def lost() -> None:
            if sandbox is not None:
                sandbox.channel_lost()

        sock = await self.engine.start_attached(container_id)
        channel = await start_guest(
            sock,
            name,
            on_lost=lost,
            demux=DockerDemux(),
            memory=memory,
            sleep_after_s=self.config.guest_sleep_after_s,
        )
        start_as = functools.partial(self.engine.attach_exec, container_id)
        sandbox = DockerSandbox(
            engine=self.engine,
            container_id=container_id,
            layer_bound_bytes=layer_bound_bytes,
            name=name,
            channel=channel,
            open_guest=SubGuests(channel, name, start_as, DockerDemux).open,
            guarded=self.guarded,
            allowlist=self.allowlist,
            network_refused=network_refused or self._network_refused(),
            ends_itself=ends_itself,
            on_closed=lambda s: self._sandboxes.pop(s.id, None),
        )
        self._sandboxes[container_id] = sandbox
        log.info("sandbox %s started (%s)", name, container_id[:12])
        return sandbox

    async def _remove_quietly(self, container_id: str) -> None:
        try:
            await self.engine.remove(container_id)
        except SandboxError as e:
            log.warning("could not remove container %s: %s", container_id[:12], e)

    # -- the rest of the contract

    async def list(self, *, all_servers: bool = False) -> list[SandboxInfo]:
        mine = f"{L.SERVER}={label_value(self.server_id)}"
        wanted = [f"{L.ORSBOX}=1"] if all_servers else [mine]
        return [to_info(c) for c in await self.engine.list(wanted)]

    async def sweep(self) -> int:
        """Remove containers whose owning server process is certainly dead."""
        containers = await self.engine.list([f"{L.ORSBOX}=1"])
        doomed = [
            c["Id"]
            for c in containers
            if not L.is_mine(c.get("Labels") or {}, self.server_id)
            and L.owner_is_dead(c.get("Labels") or {})
        ]
        async with anyio.create_task_group() as tg:
            for container_id in doomed:
                tg.start_soon(self._remove_quietly, container_id)
        if doomed:
            log.info("swept %d container(s) of dead servers", len(doomed))
        await self._sweep_rules()
        images = await self.snapshots.sweep()
        if images:
            log.info("swept %d snapshot image(s) of dead servers", images)
        return len(doomed)

    async def _sweep_rules(self) -> None:
        """Remove the proxies, egress rules and networks of dead servers
        (`guarded.sweep_host_state`); a host where this process cannot list iptables rules has none
        of its making to remove."""
        try:
            swept = await sweep_host_state(self.engine)
        except SandboxError as e:
            swept = Swept(0, rules_error=str(e))
        if swept.rules_error is not None:
            log.debug("egress rules not swept: %s", swept.rules_error)
        elif swept.rules or swept.networks:
            log.info("swept %d egress rule(s), %d network(s) of dead servers", swept.rules,
                     swept.networks)  # fmt: skip

    async def sweep_host_state(self, *, everything: bool = False) -> HostStateSwept:
        return (await sweep_host_state(self.engine, everything)).report()

    async def network_checks(self, *, allowlists: bool) -> builtins.list[EngineCheck]:
        allow = self.config.egress_allow
        return await network_checks(
            self.guarded.bridge, allow, allowlists=allowlists, guarded=self._gives_networks
        )

    async def _gives_networks(self) -> bool:
        """Its sandboxes get networks of their own to guard (not on Podman: `podman.py`)."""
        await self._product()
        return self._network_refused() is None

    async def prepare_network(self) -> None:
        await self._product()
        refused = self._network_refused()
        if refused is not None:
            raise SandboxError(refused)
        await self.guarded.ensure()

    def _network_refused(self, runtime: str | None = None) -> str | None:
        """Why no sandbox of this engine (or under `runtime`) may join or switch to a
        network: Podman's (`podman.py`), gVisor's (`--network=none`: a switch would
        change nothing inside); None where they may. Asked once the engine answered."""
        product = self.engine.product
        if product and is_podman(product):
            return no_guarded_network(product)
        if is_gvisor(runtime):
            return (
                f"a sandbox under {runtime} (gVisor) has no network and cannot be given "
                "one: the runtime runs with --network=none (docs/gvisor.md)"
            )
        return None

    async def usage_of(self, sandbox_id: str) -> ResourceUsage | None:
        try:
            return await self.engine.usage(sandbox_id)
        finally:
            self.engine.forget(sandbox_id)  # a one-off look: keep no pid for it

    async def remove(self, sandbox_id: str) -> None:
        await self.engine.remove(sandbox_id)

    async def close(self) -> None:
        async with anyio.create_task_group() as tg:
            for sandbox in list(self._sandboxes.values()):
                tg.start_soon(self._close_quietly, sandbox)
        await asyncio.gather(*self._orphans, return_exceptions=True)
        await self.snapshots.close()
        await self.allowlist.close()
        await self.guarded.close()
        await anyio.to_thread.run_sync(self.engine.close)

    async def _close_quietly(self, sandbox: DockerSandbox) -> None:
        try:
            await sandbox.close()
        except SandboxError as e:
            log.warning("could not close sandbox %s: %s", sandbox.name, e)

    async def health(self) -> str | None:
        """None when the engine answers. An engine call that succeeded in the last
        `HEALTH_FRESH_S` is answer enough: during a burst of starts a ping would queue
        behind them and make the health check itself slow."""
        if time.monotonic() - self.engine.last_answer < HEALTH_FRESH_S:
            return None
        try:
            await self.engine.ping()
        except SandboxError as e:
            return str(e)
        return None


async def seed(sandbox: DockerSandbox, disk: DiskPlan) -> None:
    """Copy the image's content into the sandbox's bounded folders (see `disk.py`)."""
    for folder in disk.folders:
        if folder.content is not None:
            await sandbox.unpack(folder.content, folder.path, user=disk.owner(folder))


def to_info(container: dict[str, Any]) -> SandboxInfo:
    labels = container.get("Labels") or {}
    names = container.get("Names") or ["?"]
    return SandboxInfo(
        id=container["Id"],
        name=names[0].lstrip("/"),
        image=container.get("Image", ""),
        session_id=labels.get(L.SESSION, ""),
        server_id=labels.get(L.SERVER, ""),
        status=container.get("State", ""),
        labels=labels,
        created=container.get("Created"),
        owner=L.owner_state(labels),
        owner_pid=labels.get(L.PID),
    )
