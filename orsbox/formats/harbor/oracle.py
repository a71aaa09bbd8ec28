"""Authoring checks: does a task's solution pass and an untouched sandbox fail?

What a dataset author runs before publishing (`orsbox check PATH`). Per task, two
episodes at once on the same backend the server uses:

  solution   `solution/` is copied to `/solution` (as root) and `solve.sh` runs as the
             agent's user with `[solution].env`, as Harbor's oracle agent runs it (output
             in /logs/agent/oracle.txt), under
             the agent's time limit; then the task is graded: expected 1.0;
  untouched  the task is graded right after setup: expected 0.0.

A grading that could not run (`GradingError`) is kept as that episode's result, so the
author reads "the verifier could not run" and why, not "the solution scores 0".
"""

from __future__ import annotations

import asyncio
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
from orsbox.formats.harbor.task import HarborTask
from orsbox.formats.harbor.verifier import TEST_STDOUT
from orsbox.sandbox.base import SandboxBackend

SOLVE_TIMEOUT_S = 600.0
ORACLE_LOG = "/logs/agent/oracle.txt"
INSTALL = """set -e
rm -rf /solution 2>/dev/null || find /solution/ -mindepth 1 -delete
mkdir -p /solution /logs/agent && chmod 777 /logs /logs/agent
tar -x --no-same-owner -C /solution -f -
chmod -R a+rX /solution
"""


Graded = Grade | GradingError  # a reward, or the grader could not run
CAUSE_LINES = 3


@dataclass(frozen=True)
class TaskCheck:
    task: str
    solution: Graded | None
    untouched: Graded | None
    seconds: float
    error: str | None = None
    solution_output: str = ""  # test.sh's whole output when grading the solution

    def cause(self, lines: int = CAUSE_LINES) -> str:
        """The last non-empty lines of the solution's test output, where a failure
        usually says what went wrong (a test's assertion, apt's error)."""
        shown = [line.strip() for line in self.solution_output.splitlines() if line.strip()]
        return " | ".join(shown[-lines:])

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
    # the two episodes at once: a verifier may take a minute (apt at grading time)
    both = await asyncio.gather(
        _episode(env_cls, task, backend, solve=True),
        _episode(env_cls, task, backend, solve=False),
        return_exceptions=True,
    )
    failed = [e for e in both if isinstance(e, BaseException)]
    if failed:  # a check reports every failure in its row
        if not isinstance(failed[0], Exception):
            raise failed[0]
        error = f"{type(failed[0]).__name__}: {failed[0]}"
        return TaskCheck(name, None, None, time.monotonic() - started, error)
    (solution, output), (untouched, _) = [e for e in both if not isinstance(e, BaseException)]
    return TaskCheck(name, solution, untouched, time.monotonic() - started, None, output)


async def _episode(
    env_cls: type[HarborEnvironment], task: HarborTask, backend: SandboxBackend, *, solve: bool
) -> tuple[Graded, str]:
    """The episode's grade (or why it could not be graded) and the tests' whole output."""
    env = env_cls(task_spec=task.spec())
    session = f"check-{uuid.uuid4().hex[:8]}"
    env.orsbox_context = EnvironmentContext(session_id=session, sandbox_backend=backend)
    await env.setup()
    try:
        if solve:
            await _solve(env, task)
        try:
            grade: Graded = await env.grade()
        except GradingError as e:
            grade = e
        return grade, await _test_output(env, grade)
    finally:
        await env.teardown()


async def _test_output(env: HarborEnvironment, grade: Graded) -> str:
    """Harbor's `test-stdout.txt` (read as root); Terminal-Bench 1 has none: its
    output is in the grade (or, when grading could not run, in the error)."""
    read = await env.sandbox.exec(
        ["bash", "-c", f"cat {TEST_STDOUT} 2>/dev/null"], user="root", output_cap_bytes=8 << 20
    )
    if read.exit_code == 0:
        return read.output
    return grade.text if isinstance(grade, Grade) else grade.message


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
