"""Keep orsbox's infrastructure failures out of platoon's training (docs/train-with-platoon.md).

platoon 0.4.0 grades an ORS session itself (`OrsSession.grade`): a tool that raised over
`ors+http://` is the policy's failure unless it is the declared terminal tool or the
openreward client's own session or transport error. So when a *non-terminal* tool fails
with orsbox's `[infra]` marker (the sandbox died under a `bash` call), the openreward
client ends the session, the policy can no longer submit, and platoon scores the rollout
0.0 (`no_submit`), which trains. `mask_infra_failures(service)` makes such a rollout an
untrainable `error` outcome instead (`failure_kind="orsbox_infra"`), as platoon does for
an infrastructure failure it recognises:

    from platoon.envs.service import get_service
    from orsbox.integrations.platoon import mask_infra_failures

    service = mask_infra_failures(get_service("ors+http://h1:8080,h2:8080/coding"))

or, in a platoon config, as the environment's service (`service_kwargs` gives `uri` and
the service's own options):

    service: orsbox.integrations.platoon:masked_ors_service
    service_kwargs: {uri: "ors+http://h1:8080,h2:8080/coding", terminal_tools: [submit]}

It imports nothing from orsbox (platoon needs Python 3.12; copy this file beside your
config where orsbox is not installed) and only platoon's public service API: the
sessions' `call_tool`, `fork`, `grade` and `rollout_id`, and `Outcome.infra`.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

# A tool result's text as platoon shows a call that raised: the exception's class, then
# the openreward client's "(environment session sid=...) " before the server's text,
# which begins with the marker. Anchored: a tool's own failure quotes text a model can
# choose (`tool_failed: ... '[infra] ...'`), which must not pass for one.
_INFRA = re.compile(
    r"^(?:The env session is gone: )?(?:[A-Za-z_][\w.]*: )?(?:\([^()]*\) )?\[infra\] [a-z_]+: "
)
_REMEMBERED = 10_000  # rollouts whose first infrastructure failure is kept


def is_infra_result(text: str) -> bool:
    """Whether a platoon tool result's text is an orsbox infrastructure failure."""
    return _INFRA.match(text) is not None


def mask_infra_failures(service: Any) -> Any:
    """`service` (platoon's `OrsEnvironmentService`), its sessions graded as an
    infrastructure `error` once a call of their rollout failed with orsbox's `[infra]`
    marker, whatever platoon made of it. Returns the same object."""
    failures: dict[str, str] = {}  # rollout id -> the first marked failure's text
    open_session, open_fork = service.open, service.open_fork

    async def opened(*args: Any, **kwargs: Any) -> Any:
        return _watched(await open_session(*args, **kwargs), failures)

    async def forked(*args: Any, **kwargs: Any) -> Any:
        return _watched(await open_fork(*args, **kwargs), failures)

    service.open, service.open_fork = opened, forked
    return service


def masked_ors_service(uri: str, **options: Any) -> Any:
    """A platoon service factory: `get_service(uri, **options)`, masked."""
    return mask_infra_failures(_platoon_services().get_service(uri, **options))


def _platoon_services() -> Any:
    """`platoon.envs.service`, imported when first needed (platoon is not orsbox's
    dependency: it needs Python 3.12 and lives in the trainer's environment)."""
    return importlib.import_module("platoon.envs.service")


def _watched(session: Any, failures: dict[str, str]) -> Any:
    call_tool, fork, grade = session.call_tool, session.fork, session.grade
    rollout = str(session.rollout_id)

    async def watched_call(name: str, arguments: Any) -> Any:
        result = await call_tool(name, arguments)
        if getattr(result, "is_error", False) and rollout not in failures:
            text = " ".join(
                str(block.get("text", "")) for block in result.content if isinstance(block, dict)
            )
            if is_infra_result(text):
                if len(failures) >= _REMEMBERED:
                    failures.pop(next(iter(failures)))
                failures[rollout] = text
        return result

    async def watched_fork(*args: Any, **kwargs: Any) -> Any:
        return _watched(await fork(*args, **kwargs), failures)

    async def watched_grade() -> Any:
        outcome = await grade()
        failure = failures.get(rollout)
        if failure is None or not outcome.trainable:
            return outcome
        metadata = {
            **outcome.metadata,
            "masked_outcome": outcome.status,
            "masked_reward": outcome.reward,
        }
        outcome_type = _platoon_services().Outcome
        return outcome_type.infra("orsbox_infra", reason=failure, metadata=metadata)

    session.call_tool, session.fork, session.grade = watched_call, watched_fork, watched_grade
    return session
