"""Keep infrastructure failures out of TRL training (docs/infra-failures.md).

TRL's `OpenRewardSpec` turns a failed call into the text `Error: ...` and a reward of
`None`; its default reward function scores a rollout by its last reward, `None` when
there is none, and `GRPOTrainer` leaves a rollout all of whose rewards are `None` out
of its group's baseline with an advantage of 0. So a rollout whose grader could not
run is masked, but so is one whose model never submitted, and a reward function that
scores "no reward" as 0.0 (to teach submitting) scores a dead sandbox 0.0 too.

`mask_infra_failures(spec)` gives both apart: its factory marks a rollout
`infra_failed` when a call's error carries orsbox's `[infra]` marker, and its reward
function answers `None` (masked) for such a rollout, the last reward otherwise, and
`no_reward` (0.0 unless given) for a rollout that ended without one. Nothing here
imports TRL: it wraps the objects the spec makes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orsbox.client import is_infra  # orsbox.protocol.reasons's, as the client reads it


def mask_infra_failures(
    spec: Any, *, no_reward: float | None = 0.0
) -> tuple[Callable[[], Any], Callable[..., list[float | None]]]:
    """`(environment_factory, reward_func)` for `GRPOTrainer`, from an `OpenRewardSpec`."""

    def environment_factory() -> Any:
        env = spec.environment_factory()
        env.infra_failed = False
        call, reset = env._call_ors_tool, env.reset

        def tracked_call(name: str, tool_input: dict[str, Any]) -> str:
            text = call(name, tool_input)
            env.infra_failed = env.infra_failed or is_infra(text)
            return text

        def tracked_reset(**row: Any) -> str:
            env.infra_failed = False
            return reset(**row)

        # the tool methods TRL binds call `self._call_ors_tool`: the instance's wins
        env._call_ors_tool, env.reset = tracked_call, tracked_reset
        return env

    def reward_func(environments: list[Any], **_: Any) -> list[float | None]:
        return [
            None if env.infra_failed else env.reward if env.reward is not None else no_reward
            for env in environments
        ]

    return environment_factory, reward_func
