"""The class a skeleton dataset becomes: what a format writes beyond the shared
`DatasetEnvironment` (its prompt, its sandbox, its grading and its `submit`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from orsbox.authoring.grader import Grade
from orsbox.authoring.tools import tool
from orsbox.formats.dataset import DatasetEnvironment, dataset_class
from orsbox.protocol.types import JSONObject, TextBlock, ToolOutput
from tests.skeleton_format import SkeletonOptions


@dataclass(frozen=True)
class SkeletonTask:
    name: str
    prompt: str
    check: str  # stays on the server: /tasks lists the name only


class SkeletonEnvironment(DatasetEnvironment[SkeletonTask]):
    check_timeout_s: ClassVar[float]

    @classmethod
    def task_spec_of(cls, task: SkeletonTask) -> JSONObject:
        return {"name": task.name}

    def task_sandbox(self) -> dict[str, Any]:
        return {}  # every task runs in the class's image (orsbox/base), as it is

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=self.task.prompt)]

    async def grade(self) -> Grade:
        done = await self.sandbox.exec(
            ["bash", "-c", self.task.check], timeout_s=self.check_timeout_s
        )
        passed = done.exit_code == 0
        return Grade(reward=1.0 if passed else 0.0, text="solved" if passed else "not solved")

    @tool
    async def submit(self) -> ToolOutput:
        """Submit: the task's check runs in the sandbox. Ends the episode."""
        return await self.final_output()


def dataset_environment(
    path: Path, tasks: list[SkeletonTask], options: SkeletonOptions
) -> type[SkeletonEnvironment]:
    return dataset_class(
        SkeletonEnvironment,
        options.name or path.stem,
        options,
        tasks={t.name: t for t in tasks},
        splits={options.split or "test": [t.name for t in tasks]},
        check_timeout_s=options.check_timeout_s,
    )
