"""An environment written with the `openreward` package whose grader raises: served
by orsbox unchanged, the call ends in an `error` event (nothing here imports orsbox)."""

from __future__ import annotations

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel


class AnswerParams(BaseModel):
    answer: str


class BrokenGrader(Environment):
    """One task; its grader's test runner is not there."""

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"question": "what is 2+2?"}]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=self.task_spec["question"])]

    @tool
    def submit(self, params: AnswerParams) -> ToolOutput:
        """Submit the answer."""
        raise RuntimeError("the grader's runner is missing")
