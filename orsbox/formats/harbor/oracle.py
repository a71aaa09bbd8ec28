"""Authoring checks: does a task's solution pass and an untouched sandbox fail?

What a dataset author runs before publishing (`orsbox check PATH`). Per task, two
episodes on the same backend the server uses:

  solution   `solution/` is copied to `/solution` (as root) and `solve.sh` runs as the
             agent's user with `[solution].env`, as Harbor's oracle agent runs it (output
             in /logs/agent/oracle.txt), under
             the agent's time limit; then the task is graded: expected 1.0;
  untouched  the task is graded right after setup: expected 0.0.

A grading that could not run (`GradingError`) is kept as that episode's result, so the
author reads "the verifier could not run" and why, not "the solution scores 0".
"""

from __future__ import annotations

import io
import shlex
import tarfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from orsbox.authoring.environment import EnvironmentContext
from orsbox.authoring.grader import Grade
from orsbox.errors import GradingError
from orsbox.formats.harbor.environment import HarborEnvironment
from orsbox.formats.harbor.images import MAKE_SCRATCH
from orsbox.formats.harbor.task import HarborTask
from orsbox.sandbox.base import SandboxBackend

SOLVE_TIMEOUT_S = 600.0
ORACLE_LOG = "/logs/agent/oracle.txt"
INSTALL = f"""set -e
{MAKE_SCRATCH}
rm -rf /solution 2>/dev/null || find /solution/ -mindepth 1 -delete
mkdir -p /solution /logs/agent && chmod 777 /logs /logs/agent
tar -x --no-same-owner -C /solution -f -
chmod -R a+rX /solution
"""


Graded = Grade | GradingError  # a reward, or the grader could not run


@dataclass(frozen=True)
class TaskCheck:
    task: str
    solution: Graded | None
    untouched: Graded | None
    seconds: float
    error: str | None = None

    @property
    def passed(self) -> bool:
        return (
            self.error is None
            and isinstance(self.solution, Grade)
            and isinstance(self.untouched, Grade)
            and self.solution.reward == 1.0
            and self.untouched.reward == 0.0
        )

    @property
    def grading_errors(self) -> dict[str, GradingError]:
        """{"solution" | "untouched": the error} for the episodes whose grading failed."""
        graded = {"solution": self.solution, "untouched": self.untouched}
        return {k: v for k, v in graded.items() if isinstance(v, GradingError)}


async def check_task(
    env_cls: type[HarborEnvironment], name: str, backend: SandboxBackend
) -> TaskCheck:
    started = time.monotonic()
    task = env_cls.tasks[name]
    try:
        solution = await _episode(env_cls, task, backend, solve=True)
        untouched = await _episode(env_cls, task, backend, solve=False)
    except Exception as e:  # a check reports every failure in its row
        return TaskCheck(name, None, None, time.monotonic() - started, f"{type(e).__name__}: {e}")
    return TaskCheck(name, solution, untouched, time.monotonic() - started)


async def _episode(
    env_cls: type[HarborEnvironment], task: HarborTask, backend: SandboxBackend, *, solve: bool
) -> Graded:
    env = env_cls(task_spec=task.spec())
    session = f"check-{uuid.uuid4().hex[:8]}"
    env.orsbox_context = EnvironmentContext(session_id=session, sandbox_backend=backend)
    await env.setup()
    try:
        if solve:
            await _solve(env, task)
        try:
            return await env.grade()
        except GradingError as e:
            return e
    finally:
        await env.teardown()


async def _solve(env: HarborEnvironment, task: HarborTask) -> None:
    if task.solution is None:
        raise FileNotFoundError(f"task {task.name} has no solution script")
    archive = _tar(task.solution)
    installed = await env.sandbox.exec(["bash", "-c", INSTALL], stdin=archive, user="root")
    if installed.exit_code != 0:
        raise RuntimeError(f"could not copy the solution in: {installed.output.strip()}")
    script = f"/solution/{task.solution.name}"
    await env.sandbox.exec(["chmod", "+x", script], user="root")
    await env.sandbox.exec(
        ["bash", "-c", f"({shlex.quote(script)}) > {ORACLE_LOG} 2>&1"],
        env={"DEBIAN_FRONTEND": "noninteractive", **task.solution_env},
        cwd=task.workdir,
        timeout_s=min(task.agent_timeout_s or SOLVE_TIMEOUT_S, SOLVE_TIMEOUT_S),
    )


def _tar(solution: Path) -> bytes:
    """The solution's folder (Harbor: `solution/`), or the one script (Terminal-Bench 1)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if solution.parent.name == "solution":
            for child in sorted(solution.parent.iterdir()):
                tar.add(child, arcname=child.name)
        else:
            tar.add(solution, arcname=solution.name)
    return buffer.getvalue()
