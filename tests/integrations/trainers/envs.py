"""The trainers' tests' own environment (no containers): tests/fixture_envs'
`Graded` (task 0 grades the answer 4, task 1's grader cannot run: a grading error,
marked `[infra]`) and a task 4 whose setup fails (the session's first request is a
500 with `"infra": true`)."""

from __future__ import annotations

from tests.fixture_envs.grading_envs import Graded

SETUP_FAILS = 4


class Shaky(Graded):
    @classmethod
    def list_tasks(cls, split: str):
        failing = {"question": "what is 2+2? (its setup fails)", "grader": "ok", "fail_setup": True}
        return [*super().list_tasks(split), failing]

    async def setup(self):
        if self.task_spec.get("fail_setup"):
            raise RuntimeError("the task's image could not be pulled")
