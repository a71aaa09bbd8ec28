"""Drive platoon's own ORS environment service as its trainer drives it, with a scripted
policy in place of the model. Run by tests/integrations/trainers/test_platoon_source.py
with the Python of a venv where platoon is installed (platoon needs Python >= 3.12):

    python platoon_driver.py < plan.json > results.json

The plan names the services (`ors+http://h1,h2/Env?variant=...` and platoon's service
options) and the rollouts: each a task id, a rollout id and the tool calls the policy
makes. Per rollout, as platoon's `harness_rollout` does for the environment: the service
resolves the task (`get_task`), `open_session` opens it (platoon picks the server from
the rollout id), the session lists its tools and takes the calls, `grade()` grades it and
`close()` ends it. The rollouts of a plan run at once, as a training step's group does.
`mask` wraps a service with orsbox's `mask_infra_failures`, loaded from the file named
by `mask_module` (it imports nothing from orsbox, so a trainer can copy the file).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from typing import Any


def _load_mask(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("orsbox_platoon_mask", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.mask_infra_failures


async def _rollout(service: Any, rollout: dict[str, Any]) -> dict[str, Any]:
    from platoon.envs.service import EnvSetupError, open_session

    answer: dict[str, Any] = {"rollout_id": rollout["rollout_id"], "task": rollout["task"]}
    try:
        task = await service.get_task(rollout["task"])
        session = await open_session(service, task, rollout_id=rollout["rollout_id"])
    except EnvSetupError as exc:
        answer["setup_error"] = {"kind": exc.failure_kind, "message": str(exc)}
        return answer
    try:
        answer["url"] = session.url
        answer["tools"] = {spec.name: spec.terminal for spec in await session.tools()}
        answer["results"] = []
        for name, arguments in rollout["actions"]:
            result = await session.call_tool(name, arguments)
            text = " ".join(block.get("text", "") for block in result.content)
            answer["results"].append(
                {
                    "tool": name,
                    "text": text,
                    "is_error": result.is_error,
                    "reward": result.reward,
                    "finished": result.finished,
                    "error_reason": result.metadata.get("error_reason"),
                }
            )
        outcome = await session.grade()
        answer["outcome"] = {
            "status": outcome.status,
            "reward": outcome.reward,
            "trainable": outcome.trainable,
            "reason": outcome.reason,
            "failure_kind": outcome.failure_kind,
        }
    finally:
        await session.close()
    return answer


async def main(plan: dict[str, Any]) -> list[dict[str, Any]]:
    from platoon.envs.ors import cleanup
    from platoon.envs.service import get_service

    services = []
    for entry in plan["services"]:
        service = get_service(entry["uri"], **entry.get("kwargs", {}))
        if entry.get("mask"):
            service = _load_mask(plan["mask_module"])(service)
        services.append(service)
    results = await asyncio.gather(*(_rollout(services[r["service"]], r) for r in plan["rollouts"]))
    await asyncio.sleep(0.2)  # the sessions' teardown runs in the background (platoon's Lease)
    return [*results, {"sessions_left": len(cleanup.live_sessions())}]


if __name__ == "__main__":
    json.dump(asyncio.run(main(json.load(sys.stdin))), sys.stdout)
