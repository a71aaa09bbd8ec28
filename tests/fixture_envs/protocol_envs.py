"""Environments that exercise the protocol server (no containers)."""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel

from orsbox import Environment, ImageBlock, Split, TextBlock, ToolOutput, tool
from orsbox.errors import BadRequest

BIG_TEXT = ("héllo   wörld  ✓ " + " " * 37 + "日本語\t\n") * 400 + " " * 5000 + "end"


class Sleep(BaseModel):
    seconds: float


class Echo(BaseModel):
    text: str


class Submit(BaseModel):
    answer: str


class Protocol(Environment):
    """Many small behaviours for raw-HTTP and client tests."""

    @classmethod
    def list_splits(cls):
        return ["train", Split(name="test", type="test"), "hard"]

    @classmethod
    def list_tasks(cls, split: str):
        return [
            {"question": f"{split} {i}: what is {i}+{i}?", "answer": str(2 * i)} for i in range(5)
        ]

    async def setup(self):
        await asyncio.sleep(float(self.task_spec.get("setup_s", 0)))
        if self.task_spec.get("refuse"):  # a dataset's task_spec naming no task of it
            raise BadRequest(f"protocol has no task named {self.task_spec['refuse']!r}")
        if self.task_spec.get("fail_setup"):
            raise RuntimeError(f"setup exploded with {self.secrets.get('token', 'no token')}")

    def teardown(self):
        log_path = self.task_spec.get("teardown_log")
        if log_path:
            with open(log_path, "a") as f:
                f.write("torn down\n")

    def get_prompt(self):
        return [TextBlock(text=self.task_spec["question"])]

    @tool
    def submit(self, params: Submit) -> ToolOutput:
        """Submit the final answer."""
        correct = params.answer.strip() == self.task_spec.get("answer")
        return ToolOutput(
            blocks=[TextBlock(text="Correct!" if correct else "Incorrect")],
            reward=1.0 if correct else 0.0,
            finished=True,
        )

    @tool
    async def sleep(self, params: Sleep) -> ToolOutput:
        """Sleep asynchronously."""
        await asyncio.sleep(params.seconds)
        return ToolOutput(blocks=[TextBlock(text=f"slept {params.seconds}")])

    blocking = 0  # `block` calls of this session running now

    @tool
    def block(self, params: Sleep) -> ToolOutput:
        """Block a thread (sync code must not stall the server)."""
        self.blocking += 1
        try:
            time.sleep(params.seconds)
        finally:
            self.blocking -= 1
        return ToolOutput(blocks=[TextBlock(text=f"blocked {params.seconds}")])

    @tool
    def blocking_now(self) -> ToolOutput:
        """How many `block` calls of this session are running."""
        return ToolOutput(blocks=[TextBlock(text=str(self.blocking))])

    @tool
    def echo(self, params: Echo) -> ToolOutput:
        """Echo text back."""
        return ToolOutput(blocks=[TextBlock(text=params.text)], metadata={"len": len(params.text)})

    @tool
    def big(self) -> ToolOutput:
        """A result over 10 KB with runs of spaces and non-ASCII text."""
        return ToolOutput(blocks=[TextBlock(text=BIG_TEXT)])

    @tool
    def image(self) -> ToolOutput:
        """An image block."""
        return ToolOutput(blocks=[ImageBlock(data="iVBORw0KGgo=", mimeType="image/png")])

    @tool
    def explode(self) -> ToolOutput:
        """Raise, mentioning the session's secret."""
        raise ValueError(f"kaboom {self.secrets.get('token', '')}")

    @tool
    def secret_names(self) -> ToolOutput:
        """Which secrets the environment received (names only) and whether one matches."""
        names = ",".join(sorted(self.secrets))
        return ToolOutput(blocks=[TextBlock(text=names)], metadata={"n": len(self.secrets)})

    @tool
    def leak(self) -> ToolOutput:
        """Return the secret itself: the server must redact it."""
        return ToolOutput(blocks=[TextBlock(text=f"token={self.secrets.get('token')}")])

    @tool(shared=False)
    def hint(self) -> ToolOutput:
        """A task-specific tool."""
        return ToolOutput(
            blocks=[
                TextBlock(text=f"the answer has {len(self.task_spec.get('answer', ''))} digits")
            ]
        )


class Second(Environment):
    """A second environment, to check routing by name."""

    @classmethod
    def name(cls) -> str:
        return "Second_Env"

    @classmethod
    def list_splits(cls):
        return ["validation"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{"n": 1}]

    def get_prompt(self):
        return [TextBlock(text="second")]

    @tool
    def ping_tool(self) -> ToolOutput:
        """Answer pong."""
        return ToolOutput(blocks=[TextBlock(text="pong")], reward=0.5)
