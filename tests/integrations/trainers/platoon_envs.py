"""An environment written with the `openreward` package that has a `@terminal` tool,
for the platoon tests (docs/train-with-platoon.md): platoon, given the class its servers
serve (`env_class`), compares the server's `/tools`, `terminal_tool` included, with it.

Task 0 and 1 grade (2+3, 40+2). Task 2's grader cannot run: `answer` raises orsbox's
`GradingError`, an `[infra] grading_error` on the wire. Task 3's sandbox is gone under
the episode: `scratch` raises orsbox's `SandboxGone`, an `[infra] sandbox_gone`. (The
two failures import orsbox; served by orsbox, that is the server's own package.)
"""

from __future__ import annotations

from openreward.environments import Environment, TextBlock, ToolOutput, terminal, tool
from pydantic import BaseModel


class Answer(BaseModel):
    answer: str


class Note(BaseModel):
    text: str


class Sums(Environment):
    """Add two numbers; write the sum as the final answer."""

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [
            {"a": 2, "b": 3},
            {"a": 40, "b": 2},
            {"a": 1, "b": 1, "fail": "grading"},
            {"a": 2, "b": 2, "fail": "sandbox"},
        ]

    def get_prompt(self) -> list[TextBlock]:
        spec = self.task_spec
        return [TextBlock(text=f"What is {spec['a']} + {spec['b']}? Answer with a number.")]

    @tool
    def scratch(self, params: Note) -> ToolOutput:
        """Write a note to yourself (no reward)."""
        if self.task_spec.get("fail") == "sandbox":
            from orsbox.errors import SandboxGone

            raise SandboxGone("sandbox 5ca1ab1e is gone: the container was killed (exit code 137)")
        return ToolOutput(blocks=[TextBlock(text="noted")])

    @terminal
    @tool
    def answer(self, params: Answer) -> ToolOutput:
        """Give the final answer."""
        if self.task_spec.get("fail") == "grading":
            from orsbox import GradingError

            raise GradingError("pytest: command not found", cause="runner-missing")
        right = str(self.task_spec["a"] + self.task_spec["b"])
        reward = 1.0 if params.answer.strip() == right else 0.0
        text = "Correct!" if reward else "Incorrect"
        return ToolOutput(blocks=[TextBlock(text=text)], reward=reward, finished=True)
