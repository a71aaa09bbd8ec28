"""`DockerSandbox`: one container, driven through its in-container agent
(`orsbox.sandbox.agent.sandbox.AgentSandbox`). The only docker API calls a sandbox makes
are removing its container, inspecting it to explain a death, switching its network,
and starting a second, short-lived agent for `exec(user=...)` as another user."""

from __future__ import annotations

from typing import Any

import anyio

from orsbox.errors import SandboxError, SandboxGone
from orsbox.sandbox.agent.sandbox import AgentSandbox
from orsbox.sandbox.docker.engine import Engine
from orsbox.sandbox.docker.guarded import GuardedNetwork
from orsbox.sandbox.usage import ResourceUsage

GONE_SETTLE_S = 3.0


class DockerSandbox(AgentSandbox):
    def __init__(
        self, *, engine: Engine, container_id: str, guarded: GuardedNetwork, **agent: Any
    ) -> None:
        super().__init__(sandbox_id=container_id, **agent)
        self._engine = engine
        self._guarded = guarded

    async def set_network(self, enabled: bool) -> None:
        if not self.alive:
            raise SandboxGone(await self._gone_message())
        network = await self._guarded.ensure() if enabled else "none"
        await self._engine.switch_network(self.id, network)

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
