"""`DockerSandbox`: one container, driven through its in-container guest
(`orsbox.sandbox.guest.sandbox.GuestSandbox`). The only docker API calls a sandbox makes
are removing its container, inspecting it to explain a death, switching its network,
starting a second, short-lived guest for `exec(user=...)` as another user, and
measuring its writable layer when it has a storage bound (`layer_bound.py`)."""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Sequence
from typing import Any, Literal

import anyio

from orsbox.errors import SandboxError, SandboxGone
from orsbox.sandbox.base import ExecResult, KilledProcesses
from orsbox.sandbox.docker.allowlist import AllowlistNetwork
from orsbox.sandbox.docker.engine import Engine
from orsbox.sandbox.docker.guarded import GuardedNetwork, network_vanished
from orsbox.sandbox.docker.layer_bound import LayerBound
from orsbox.sandbox.guest.channel import GuestChannel, Header
from orsbox.sandbox.guest.sandbox import GuestSandbox
from orsbox.sandbox.host.allowlist import proxy_env
from orsbox.sandbox.usage import ResourceUsage

log = logging.getLogger("orsbox.sandbox.docker")

GONE_SETTLE_S = 3.0
ENDS_ITSELF_S = 5.0  # the dead-man's switch takes 0.1-0.2 s; past this, removed as before


class DockerSandbox(GuestSandbox):
    def __init__(
        self,
        *,
        engine: Engine,
        container_id: str,
        guarded: GuardedNetwork,
        allowlist: AllowlistNetwork,
        layer_bound_bytes: int | None = None,
        network_refused: str | None = None,
        ends_itself: bool = False,
        **guest: Any,
    ) -> None:
        """`layer_bound_bytes`: `SandboxLimits.writable_layer_bytes`, kept by measuring
        (`layer_bound.py`) after answered calls, on a period, and before grading.
        `network_refused`: why this engine's sandboxes may not switch their network
        (Podman's: `podman.py`); None where they may. `ends_itself`: stop by the
        guest's own switch before removal (gVisor: `_let_it_end`)."""
        super().__init__(sandbox_id=container_id, **guest)
        self._ends_itself = ends_itself
        self._engine = engine
        self._guarded = guarded
        self._allowlist = allowlist
        self._network_refused = network_refused
        self._network_env: dict[str, str] = {}  # the proxy settings of an allow-list
        self._layer: LayerBound | None = None
        if layer_bound_bytes is not None:
            self._layer = LayerBound(
                engine, container_id, self.name, layer_bound_bytes, self._stop_for
            )
            self._layer.watch()

    async def close(self) -> None:
        if self._layer is not None:
            self._layer.stop()
        await super().close()

    async def _request(
        self, channel: GuestChannel, request: Header, payload: bytes, timeout_s: float
    ) -> tuple[Header, bytes]:
        answer = await super()._request(channel, request, payload, timeout_s)
        if self._layer is not None:
            if self._layer.breached is not None:
                raise SandboxGone(self._layer.breached)
            self._layer.after_call()
        return answer

    async def kill_processes_listed(self, keep_services: bool = False) -> KilledProcesses:
        """Also measure the writable layer now: this is what a grader runs first, and it
        must not grade a sandbox past its storage bound."""
        killed = await super().kill_processes_listed(keep_services)
        if self._layer is not None and await self._layer.check() is not None:
            raise SandboxGone(self._layer.breached or "")
        return killed

    async def _stop_for(self, reason: str) -> None:
        """End the container now; every later call is told `reason`."""
        if self._gone is None:
            self._gone = asyncio.get_running_loop().create_future()
            self._gone.set_result(reason)
        try:
            await self._engine.remove(self.id)
        except SandboxError as e:  # gone already, or the engine is down: said by `reason`
            log.warning("could not stop %s: %s", self.name, e)

    async def set_network(
        self, network: bool | Literal["allowlist"], allowed_hosts: Sequence[str] = ()
    ) -> None:
        if not self.alive:
            raise SandboxGone(await self._gone_message())
        if self._network_refused is not None:
            raise SandboxError(self._network_refused)
        await self._allowlist.close_proxy(self.id)
        if network == "allowlist":
            await self._engine.switch_network(self.id, await self._allowlist.ensure())
            await self.use_proxy(allowed_hosts)
            return
        if network:
            await self._join_guarded()
        else:
            await self._engine.switch_network(self.id, "none")
        await self._set_network_env({})

    async def _join_guarded(self) -> None:
        """Join the guarded network, made again when another server removed it between
        its `ensure` and this join (`guarded.py`)."""
        try:
            await self._engine.switch_network(self.id, await self._guarded.ensure())
        except SandboxError as e:
            if not network_vanished(e, self._guarded.name):
                raise
            await self._engine.switch_network(self.id, await self._guarded.ensure())

    async def use_proxy(self, allowed_hosts: Sequence[str]) -> None:
        """Start this sandbox's egress proxy (it is on the allow-list network) and
        point its processes at it."""
        networks = (await self._engine.inspect(self.id))["NetworkSettings"]["Networks"]
        address = networks[self._allowlist.name]["IPAddress"]
        url = await self._allowlist.open(self.id, address, allowed_hosts)
        await self._set_network_env(proxy_env(url))

    async def _set_network_env(self, env: dict[str, str]) -> None:
        """Every later exec gets `env` (a variable set before and not now: empty, which
        proxy users read as unset), and the persistent shell exports it."""
        gone = {name: "" for name in self._network_env if name not in env}
        if not env and not gone:
            return
        self._network_env = {**gone, **env}
        await self._export_network_env()

    async def _export_network_env(self) -> None:
        exports = [f"export {k}={shlex.quote(v)}" for k, v in self._network_env.items() if v]
        unsets = [f"unset {k}" for k, v in self._network_env.items() if not v]
        if exports or unsets:
            await self.shell("; ".join([*unsets, *exports]) + "; true", timeout_s=30)

    async def exec(
        self, command: str | list[str], *, env: dict[str, str] | None = None, **options: Any
    ) -> ExecResult:
        merged = {**self._network_env, **(env or {})}
        return await super().exec(command, env=merged or None, **options)

    async def restart_shell(self) -> None:
        await super().restart_shell()
        await self._export_network_env()

    async def usage(self) -> ResourceUsage | None:
        if self._closed:
            return None
        return await self._engine.usage(self.id)

    async def _remove(self) -> None:
        await self._allowlist.close_proxy(self.id)
        try:
            if self._ends_itself:
                await self._let_it_end()
            await self._engine.remove(self.id)
        finally:
            self._engine.forget(self.id)

    async def _let_it_end(self) -> None:
        """Under gVisor the sandbox ends itself before it is removed: its guest's stdin
        closed, the dead-man's switch stops the container (0.1-0.2 s here), and the
        removal finds it stopped, with nothing to kill.

        Why: gVisor's systrap platform keeps a host stub process for each address space
        the sandbox had (11 idle, 217 after the soak's fork bomb, measured). They end
        with the sandbox, all at once, and the engine's shim reaps them. When that flood
        meets a kill in progress, the runc shim of containerd 1.6 (Debian 12's) can
        deadlock: its Kill holds the process's lock while it waits to hear `runsc kill`
        exit, and that news waits behind the exits the flood queued, which wait for the
        lock (containerd#13849, moby/moby#40145). The removal then hung until the
        engine gave up on the shim: 3 of 79 took 15-143 s in `bench.soak --only
        fork_bomb`, and 0 of 76 once the sandbox ended itself (docs/gvisor.md). A
        sandbox that stops by itself is never killed. One that has not stopped within
        `ENDS_ITSELF_S` is removed as before."""
        self._channel.abort()  # unsent bytes (a guest that stopped reading) would hold it
        await self._engine.wait_stopped(self.id, ENDS_ITSELF_S)

    async def _why_gone(self) -> str:
        # The exec's socket closes a moment before docker records the container's end,
        # so a container still "running" is asked again for a little while.
        deadline = anyio.current_time() + GONE_SETTLE_S
        while True:
            try:
                state = (await self._engine.inspect(self.id)).get("State", {})
            except SandboxGone:
                return f"sandbox {self.name} is gone: the container was removed (killed or exited)"
            except SandboxError as e:
                return f"sandbox {self.name} is gone, and docker cannot say why: {e}"
            if not state.get("Running") or anyio.current_time() > deadline:
                return f"sandbox {self.name} is gone: {describe_state(state)}"
            await anyio.sleep(0.1)


def describe_state(state: dict[str, Any]) -> str:
    if state.get("OOMKilled"):
        return "the container ran out of memory and was killed (OOM)"
    if state.get("Running"):
        return "the sandbox guest stopped, though the container still runs"
    code = state.get("ExitCode")
    if code == 137:
        return "the container was killed (exit code 137)"
    return f"the container exited (status {state.get('Status')}, exit code {code})"
