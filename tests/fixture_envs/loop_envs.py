"""An environment whose tools hold the server's event loop, for the loop-lag monitor's
test (tests/monitoring/test_loop_lag.py) and the collector's (test_gc_pauses.py). Test-only: orsbox runs sync tools in threads, so
only an `async` tool that calls blocking code can do this, which is the mistake whose
cost the monitor makes visible."""

from __future__ import annotations

import gc
import time

from pydantic import BaseModel

from orsbox import Environment, TextBlock, ToolOutput, tool


class Hold(BaseModel):
    seconds: float


class Garbage(BaseModel):
    objects: int


class LoopHog(Environment):
    """One tool that blocks the loop it runs on."""

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{}]

    def get_prompt(self):
        return [TextBlock(text="hold the loop")]

    @tool
    async def hold_loop(self, params: Hold) -> ToolOutput:
        """Sleep synchronously inside a coroutine: the whole server waits."""
        time.sleep(params.seconds)
        return ToolOutput(blocks=[TextBlock(text=f"held {params.seconds}")])

    @tool
    async def collect_garbage(self, params: Garbage) -> ToolOutput:
        """A full collection of the server's heap with `objects` more tracked objects
        (self-referencing lists) in it, which it must walk."""
        held: list[list[object]] = [[] for _ in range(params.objects)]
        for item in held:
            item.append(item)
        gc.collect()
        return ToolOutput(blocks=[TextBlock(text=f"walked {len(held)} more")])
