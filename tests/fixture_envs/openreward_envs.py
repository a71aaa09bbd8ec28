"""Environments written with the `openreward` package, in the style of the published
ones, for the tests of `orsbox serve` serving them unchanged (nothing here imports orsbox).

`LineCount`'s tools use a sandbox it creates with openreward's sandbox API; it also
scores groups. `Dialogue` is conversation-shaped (`get_messages`) and needs no sandbox.
"""

from __future__ import annotations

import os

from openreward import AsyncOpenReward
from openreward.api.sandboxes.types import SandboxSettings
from openreward.environments import (
    Environment,
    GroupCandidate,
    GroupScore,
    Message,
    TextBlock,
    ToolOutput,
    tool,
)
from pydantic import BaseModel

IMAGE = os.environ.get("LINECOUNT_IMAGE", "orsbox/base:latest")


class CommandParams(BaseModel):
    command: str


class AnswerParams(BaseModel):
    answer: str


class LineCount(Environment):
    """Count the lines of a file the task wrote into the sandbox."""

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:  # noqa: B006
        super().__init__(task_spec)
        client = AsyncOpenReward(api_key=secrets.get("api_key"))
        self.sandbox = client.sandbox(
            SandboxSettings(
                environment="orsbox-tests/linecount",
                image=IMAGE,
                machine_size="0.5:1",
                block_network=True,
            )
        )

    async def setup(self) -> None:
        await self.sandbox.start()
        await self.sandbox.check_run(f"seq 1 {self.task_spec['lines']} > /tmp/data.txt")

    async def teardown(self) -> None:
        await self.sandbox.stop()

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"lines": 3}, {"lines": 7}] if split == "train" else [{"lines": 12}]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text="How many lines does /tmp/data.txt have? Answer with a number.")]

    @tool
    async def bash(self, params: CommandParams) -> ToolOutput:
        """Run a bash command in the sandbox."""
        output, code = await self.sandbox.run(params.command)
        return ToolOutput(blocks=[TextBlock(text=output)], metadata={"exit_code": code})

    @tool
    async def answer(self, params: AnswerParams) -> ToolOutput:
        """Give the number of lines."""
        counted = (await self.sandbox.check_run("wc -l < /tmp/data.txt")).strip()
        correct = params.answer.strip() == counted
        return ToolOutput(
            blocks=[TextBlock(text="Correct!" if correct else "Incorrect")],
            reward=1.0 if correct else 0.0,
            finished=True,
        )

    async def score_group(self, candidates: list[GroupCandidate]) -> list[GroupScore | float]:
        """1 for a candidate whose last assistant turn names the right count, else 0."""
        right = str(self.task_spec["lines"])
        scores: list[GroupScore | float] = []
        for candidate in candidates:
            said = [
                b.text
                for m in candidate.messages
                if m.role == "assistant"
                for b in m.blocks
                if b.type == "text"
            ]
            scores.append(
                GroupScore(reward=1.0, metadata={"said": said[-1]})
                if said and said[-1].strip() == right
                else 0.0
            )
        return scores


class Dialogue(Environment):
    """A conversation to continue; the reply is graded by length."""

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"topic": "tea"}]

    def get_messages(self) -> list[Message]:
        return [
            Message(role="system", blocks=[TextBlock(text="Be brief.")]),
            Message(
                role="user",
                blocks=[TextBlock(text=f"Say one word about {self.task_spec['topic']}.")],
            ),
        ]

    @tool
    def reply(self, params: AnswerParams) -> ToolOutput:
        """Reply to the conversation."""
        brief = len(params.answer.split()) == 1
        return ToolOutput(
            blocks=[TextBlock(text="ok")], reward=1.0 if brief else 0.0, finished=True
        )
