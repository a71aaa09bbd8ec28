"""Which sandbox spec to warm for an environment (`POST /orsbox/warm`).

An environment with one spec for every task is warmed by its class's spec; one whose
image is per task (a dataset format) is warmed for a task, and a task whose setup is
cached is warmed with its setup snapshot's image: a warm hand-over then skips both the
container start and the setup.
"""

from __future__ import annotations

from typing import Any

from orsbox.authoring import Environment, EnvironmentContext
from orsbox.authoring.container import ContainerEnvironment
from orsbox.authoring.user_code import call_user
from orsbox.errors import BadRequest
from orsbox.sandbox.base import SandboxSpec
from orsbox.sandbox.pool import POOL_SESSION


async def warm_spec(
    env_cls: type[Environment], task: dict[str, Any] | None, extras: dict[str, Any]
) -> SandboxSpec:
    """The spec a session of `env_cls` (on `task`, when given) would start from."""
    if not issubclass(env_cls, ContainerEnvironment):
        raise BadRequest(f"{env_cls.name()} runs no sandbox: there is nothing to warm")
    if task is None:
        spec = env_cls.prewarm_spec()
        if spec is None:
            raise BadRequest(
                f"{env_cls.name()}'s sandbox depends on the task: give split and index, "
                "or task_spec"
            )
        return spec
    env = await call_user(env_cls, task_spec=task, secrets={})
    env.orsbox_context = EnvironmentContext(session_id=POOL_SESSION, extras=extras)
    return await env.start_spec()
