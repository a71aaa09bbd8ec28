"""An environment for `orsbox eval`'s tests (no containers): many quick tasks, one
whose setup fails, one whose prompt holds an image, and a count of the sessions alive
at once, which is what the environment server sees of an evaluation's concurrency."""

from __future__ import annotations

import threading

from pydantic import BaseModel

from orsbox import Environment, ImageBlock, TextBlock, ToolOutput, tool

TASKS = 32
PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


class Answer(BaseModel):
    answer: str


def question(i: int) -> str:
    return f"[q{i}] What is {i} + {i}?"


class Sums(Environment):
    """Add a number to itself; submit the sum."""

    live = 0  # sessions set up and not yet torn down
    most_live = 0
    _lock = threading.Lock()

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        tasks = [
            {"id": f"q{i}", "question": question(i), "answer": str(2 * i)} for i in range(TASKS)
        ]
        tasks.append({"id": "broken", "question": "[broken] never asked", "fail_setup": True})
        tasks.append({"id": "picture", "question": "[picture] What colour is it?", "image": True})
        return tasks

    async def setup(self):
        if self.task_spec.get("fail_setup"):
            raise RuntimeError("the task's files are missing")
        with Sums._lock:
            Sums.live += 1
            Sums.most_live = max(Sums.most_live, Sums.live)
        self._counted = True

    def teardown(self):
        if getattr(self, "_counted", False):
            with Sums._lock:
                Sums.live -= 1

    def get_prompt(self):
        blocks = [TextBlock(text=self.task_spec["question"])]
        if self.task_spec.get("image"):
            blocks.append(ImageBlock(data=PIXEL_PNG, mimeType="image/png"))
        return blocks

    @tool
    def look(self) -> ToolOutput:
        """Look at the picture again."""
        return ToolOutput(
            blocks=[TextBlock(text="a red pixel"), ImageBlock(data=PIXEL_PNG, mimeType="image/png")]
        )

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit the answer. Ends the episode."""
        gold = self.task_spec.get("answer", "red")
        correct = params.answer.strip() == gold
        return ToolOutput(
            blocks=[TextBlock(text="Correct!" if correct else f"Incorrect: {gold}.")],
            reward=1.0 if correct else 0.0,
            finished=True,
        )
