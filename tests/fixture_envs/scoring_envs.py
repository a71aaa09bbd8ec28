"""orsbox environments using the `messages` and `score_group` hooks."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
    gate: str


class Turns(Judged):
    """A tool and a scoring that each hold the episode until the test opens their gate,
    and say what else was running meanwhile and what had finished before they began: a
    session's calls and scorings take turns (tests/test_messages_score_group.py). A
    gate is a path: `GATE.started` is made when the holder begins, and it ends once
    `GATE.release` exists. Judged's task, prompt and `answer`."""

    def __init__(self, task_spec: dict | None = None, secrets: dict | None = None) -> None:
        super().__init__(task_spec, secrets)
        self.running: list[str] = []
        self.seen_running: dict[str, list[str]] = {}
        self.finished: list[str] = []

    async def _hold(self, name: str, gate: str) -> dict:
        before = list(self.finished)
        self.seen_running[name] = list(self.running)
        self.running.append(name)
        Path(f"{gate}.started").touch()
        for _ in range(6000):  # 60 s at most: a test that never opens the gate fails
            if Path(f"{gate}.release").exists():
                break
            await asyncio.sleep(0.01)
        self.running.remove(name)
        self.finished.append(name)
        return {"finished_before": before, "running_with": self.seen_running.pop(name)}

    @tool
    async def hold(self, params: Hold) -> ToolOutput:
        """Hold the episode until the gate opens."""
        seen = await self._hold("call", params.gate)
        return ToolOutput(blocks=[TextBlock(text="held")], metadata=seen, reward=0.0)

    async def score_group(self, candidates: list[GroupCandidate]) -> list[GroupScore | float]:
        """Holds until the gate the first candidate names opens."""
        gate = candidates[0].messages[-1].blocks[0].text  # type: ignore[union-attr]
        seen = await self._hold("scoring", gate)
        return [GroupScore(reward=0.0, metadata=seen) for _ in candidates]
