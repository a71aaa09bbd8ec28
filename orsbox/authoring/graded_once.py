"""`GradedOnce`: an episode graded once, as benchmark harnesses grade a trial.

The first `submit`, or the first call after the episode's time limit, runs
`grade_episode`; every later one, concurrent ones included, gets the same finished
output, so a second grading can neither see a sandbox the first one changed nor give
the agent a second try.
"""

from __future__ import annotations

import abc
import asyncio

from orsbox.authoring.container import ContainerEnvironment
from orsbox.protocol.types import ToolOutput


class GradedOnce(ContainerEnvironment):
    _final: ToolOutput | None = None
    _final_lock: asyncio.Lock | None = None

    @abc.abstractmethod
    async def grade_episode(self, note: str) -> ToolOutput:
        """Grade the sandbox as it is; the finished output, `note` (if any) first."""

    async def final_output(self, note: str = "") -> ToolOutput:
        if self._final_lock is None:  # no await since the check: one lock per episode
            self._final_lock = asyncio.Lock()
        async with self._final_lock:
            if self._final is None:
                self._final = await self.grade_episode(note)
        return self._final

    async def episode_timed_out(self, name: str) -> ToolOutput:
        return await self.final_output()
