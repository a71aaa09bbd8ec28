"""`DockerSandbox`: one container, driven through its in-container agent
(`orsbox.sandbox.agent.sandbox.AgentSandbox`). The only docker API calls a sandbox makes
are removing its container, inspecting it to explain a death, switching its network,
starting a second, short-lived agent for `exec(user=...)` as another user, and
measuring its writable layer when it has a storage bound (`layer_bound.py`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anyio

from orsbox.errors import SandboxError, SandboxGone
from orsbox.sandbox.agent.channel import AgentChannel, Header
from orsbox.sandbox.agent.sandbox import AgentSandbox
from orsbox.sandbox.docker.engine import Engine
from orsbox.sandbox.docker.layer_bound import LayerBound
from orsbox.sandbox.usage import ResourceUsage

log = logging.getLogger("orsbox.sandbox.docker")

GONE_SETTLE_S = 3.0


class DockerSandbox(AgentSandbox):
    def __init__(
        self,
        *,
        engine: Engine,
        container_id: str,
        layer_bound_bytes: int | None = None,
        **agent: Any,
    ) -> None:
        """`layer_bound_bytes`: `SandboxLimits.writable_layer_bytes`, kept by measuring
        (`layer_bound.py`) after every answered call and on a period."""
        super().__init__(sandbox_id=container_id, **agent)
        self._engine = engine
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
        self, channel: AgentChannel, request: Header, payload: bytes, timeout_s: float
    ) -> tuple[Header, bytes]:
        answer = await super()._request(channel, request, payload, timeout_s)
        if self._layer is not None:
            breached = await self._layer.check()
            if breached is not None:
                raise SandboxGone(breached)
        return answer

    async def _stop_for(self, reason: str) -> None:
        """End the container now; every later call is told `reason`."""
        if self._gone is None:
            self._gone = asyncio.get_running_loop().create_future()
            self._gone.set_result(reason)
        try:
            await self._engine.remove(self.id)
        except SandboxError as e:  # gone already, or the engine is down: said by `reason`
            log.warning("could not stop %s: %s", self.name, e)

    async def set_network(self, enabled: bool) -> None:
        if not self.alive:
            raise SandboxGone(await self._gone_message())
        await self._engine.switch_network(self.id, "bridge" if enabled else "none")

    async def usage(self) -> ResourceUsage | None:
        if self._closed:
            return None
        return await self._engine.usage(self.id)

    async def _remove(self) -> None:
        try:
            await self._engine.remove(self.id)
        finally:
            self._engine.forget(self.id)

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
        return "the sandbox agent stopped, though the container still runs"
    code = state.get("ExitCode")
    if code == 137:
        return "the container was killed (exit code 137)"
    return f"the container exited (status {state.get('Status')}, exit code {code})"
