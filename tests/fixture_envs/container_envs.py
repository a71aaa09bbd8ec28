"""Container environments for end-to-end tests through the server."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from orsbox import TextBlock, ToolOutput, tool
from orsbox.authoring import SingleTask
from orsbox.authoring.standard_tools import BashTool, FileTools, PythonTool
from orsbox.sandbox import SandboxLimits

TASK_FILES = Path(__file__).parent / "task_files"


class Answer(BaseModel):
    path: str


class Sandboxed(BashTool, PythonTool, FileTools):
    """Every standard tool, small limits so hostile commands hit them fast."""

    limits = SandboxLimits(memory_bytes=256 * 1024**2, pids=256, cpus=1.0)
    exec_timeout_s = 20.0

    @classmethod
    def list_splits(cls):
        return ["test"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{"expected": "hello"}]

    def get_prompt(self):
        return [TextBlock(text=f"write {self.task_spec['expected']!r} to /workspace/out.txt")]

    def task_files(self):
        return {str(TASK_FILES): "/workspace/task"}

    @tool
    async def submit(self) -> ToolOutput:
        """Grade: runs a hidden check inside the container."""
        expected = self.task_spec["expected"]
        result = await self.sandbox.exec(
            f'test "$(cat /workspace/out.txt)" = {expected!r}', timeout_s=10
        )
        ok = result.exit_code == 0
        return ToolOutput(
            blocks=[TextBlock(text="pass" if ok else "fail")], reward=float(ok), finished=True
        )


class OnlyBash(SingleTask, BashTool):
    """Opt-in: this one gets bash alone."""

    prompt = "bash only"


class MissingImage(OnlyBash):
    """Its image does not exist: setup must fail naming it."""

    image = "orsbox/does-not-exist:latest"
