"""orsbox environments using the `messages` and `score_group` hooks."""

from __future__ import annotations

from pydantic import BaseModel

from orsbox import Environment, TextBlock, ToolOutput, tool
from orsbox.protocol.types import GroupCandidate, GroupScore, Message


class Reply(BaseModel):
    text: str


class Judged(Environment):
    """Messages by default (the prompt as one user message); scores groups by length."""

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"question": "Name a colour."}]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=self.task_spec["question"])]

    @tool
    def answer(self, params: Reply) -> ToolOutput:
        """Answer."""
        return ToolOutput(blocks=[TextBlock(text="noted")], reward=0.0, finished=True)

    async def score_group(self, candidates: list[GroupCandidate]) -> list[GroupScore | float]:
        """The shortest final answer wins; raises for an empty group, as a judge may."""
        if not candidates:
            raise ValueError("nothing to judge")
        lengths = [len(c.messages[-1].blocks[0].text) for c in candidates]  # type: ignore[union-attr]
        best = min(lengths)
        return [GroupScore(reward=1.0, metadata={"rank": 1}) if n == best else 0.0 for n in lengths]


class Conversation(Environment):
    """Overrides `messages`; does not score groups."""

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{}]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text="Continue.")]

    async def messages(self) -> list[Message]:
        return [
            Message(role="system", blocks=[TextBlock(text="You are terse.")]),
            Message(role="user", blocks=[TextBlock(text="Continue.")]),
        ]

    @tool
    def answer(self, params: Reply) -> ToolOutput:
        """Answer."""
        return ToolOutput(blocks=[TextBlock(text="noted")], reward=1.0, finished=True)
