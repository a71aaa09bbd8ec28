"""A Python environment whose grader gives each of grading's three outcomes (no
containers): a reward, a `GradingError` naming its cause, and an exception."""

from __future__ import annotations

from pydantic import BaseModel

from orsbox import Environment, GradingError, TextBlock, ToolOutput, tool

MISSING = "pytest: command not found\n/usr/bin/python3: No module named pip"


class Answer(BaseModel):
    answer: str


class Graded(Environment):
    """Task 0 grades (the answer 4); task 1's grader cannot run (its runner is
    missing); task 2's grader raises an ordinary exception; task 3 grades (the answer 7,
    the one tests/integrations/test_trl_grpo.py's model gives)."""

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return [
            {"question": "[graded] what is 2+2?", "grader": "ok"},
            {"question": "[runner missing] what is 3+3?", "grader": "missing"},
            {"question": "[grader raises] what is 4+4?", "grader": "raises"},
            {"question": "[graded] what is 3+4?", "grader": "ok", "answer": "7"},
        ]

    def get_prompt(self):
        return [TextBlock(text=self.task_spec["question"])]

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit the final answer."""
        grader = self.task_spec["grader"]
        if grader == "missing":
            raise GradingError(MISSING, cause="runner-missing")
        if grader == "raises":
            raise ValueError("the grader crashed")
        reward = 1.0 if params.answer.strip() == self.task_spec.get("answer", "4") else 0.0
        return ToolOutput(blocks=[TextBlock(text=f"reward {reward}")], reward=reward, finished=True)
