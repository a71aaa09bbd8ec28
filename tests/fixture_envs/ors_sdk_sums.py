"""tests/fixture_envs/eval_envs.py's sums written against ors-sdk and served by its reference
server (`python tests/fixture_envs/ors_sdk_sums.py PORT`): `orsbox eval --url` must work with
any ORS server, not only orsbox."""

from __future__ import annotations

import sys

from ors import Environment, Server, Split, TextBlock, ToolOutput, tool
from pydantic import BaseModel

TASKS = 4


class Answer(BaseModel):
    answer: str


class Sums(Environment):
    @classmethod
    def list_splits(cls):
        return [Split(name="train", type="train")]

    @classmethod
    def list_tasks(cls, split: str):
        return [
            {"id": f"q{i}", "question": f"[q{i}] What is {i} + {i}?", "answer": str(2 * i)}
            for i in range(TASKS)
        ]

    def get_prompt(self):
        return [TextBlock(text=self.task_spec["question"])]

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit the answer. Ends the episode."""
        correct = params.answer.strip() == self.task_spec["answer"]
        return ToolOutput(
            blocks=[TextBlock(text="Correct!" if correct else "Incorrect")],
            reward=1.0 if correct else 0.0,
            finished=True,
        )


if __name__ == "__main__":
    Server([Sums]).run(port=int(sys.argv[1]))
