"""orsbox environments using the `messages` and `score_group` hooks."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from orsbox import Environment, TextBlock, ToolOutput, tool
from orsbox.errors import GradingError
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
        """The shortest final answer wins; raises for an empty group, as a judge may,
        and cannot grade a group with an answer of "judge-down" (its judge is gone)."""
        if not candidates:
            raise ValueError("nothing to judge")
        if any(c.messages[-1].blocks[0].text == "judge-down" for c in candidates):  # type: ignore[union-attr]
            raise GradingError("the judge did not answer", cause="judge-unreachable")
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


class Hold(BaseModel):
    seconds: float


class Turns(Judged):
    """A tool and a scoring that each hold the episode for a while and say what else was
    running meanwhile and what had finished before they began: a session's calls and
    scorings take turns (tests/test_messages_score_group.py). Judged's task, prompt and
    `answer`."""

    def __init__(self, task_spec: dict | None = None, secrets: dict | None = None) -> None:
        super().__init__(task_spec, secrets)
        self.running: list[str] = []
        self.seen_running: dict[str, list[str]] = {}
        self.finished: list[str] = []

    async def _hold(self, name: str, seconds: float) -> dict:
        before = list(self.finished)
        self.seen_running[name] = list(self.running)
        self.running.append(name)
        await asyncio.sleep(seconds)
        self.running.remove(name)
        self.finished.append(name)
        return {"finished_before": before, "running_with": self.seen_running.pop(name)}

    @tool
    async def hold(self, params: Hold) -> ToolOutput:
        """Hold the episode for a while."""
        seen = await self._hold("call", params.seconds)
        return ToolOutput(blocks=[TextBlock(text="held")], metadata=seen, reward=0.0)

    async def score_group(self, candidates: list[GroupCandidate]) -> list[GroupScore | float]:
        """Holds for the seconds the first candidate says."""
        seconds = float(candidates[0].messages[-1].blocks[0].text)  # type: ignore[union-attr]
        seen = await self._hold("scoring", seconds)
        return [GroupScore(reward=0.0, metadata=seen) for _ in candidates]
