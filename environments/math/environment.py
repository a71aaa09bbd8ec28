"""GSM8K-style word problems graded like the ORS quick start: the part after `####`.

The tasks are original problems written for orsbox in GSM8K's format (no dataset
licence applies); each split is a JSONL file beside this module.

Safe to train on: a wrong answer is told it is wrong, not what the right one was, and
the episode is graded once. The first `submit` is the result; every later one gets that
same finished output back, reward unchanged, as `GradedOnce` does for container
environments. (The ORS quick start's environment says the answer and grades every
submit: a policy trained against it learns "submit anything, then submit what you
read".)"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from pydantic import BaseModel, Field

from orsbox import Environment, TextBlock, ToolOutput, tool

HERE = Path(__file__).parent


class SubmitParams(BaseModel):
    answer: str = Field(description="the final numeric answer, e.g. 42")


@cache
def _load(split: str) -> list[dict]:
    lines = (HERE / f"tasks-{split}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


class Math(Environment):
    """Grade-school math word problems; submit the final number."""

    _graded: ToolOutput | None = None

    @classmethod
    def list_splits(cls):
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str):
        return _load(split)

    def get_prompt(self):
        return [
            TextBlock(
                text=f"{self.task_spec['question']}\n\nSubmit the final number with the submit tool."
            )
        ]

    @tool
    def submit(self, params: SubmitParams) -> ToolOutput:
        """Submit your final answer to the problem. Ends the episode: only the first
        answer is graded."""
        if self._graded is None:
            gold = self.task_spec["answer"].split("####")[-1].strip()
            correct = params.answer.strip() == gold
            self._graded = ToolOutput(
                blocks=[TextBlock(text="Correct!" if correct else "Incorrect.")],
                reward=1.0 if correct else 0.0,
                finished=True,
            )
        return self._graded
