"""`GradedOnce`: an episode graded once, as benchmark harnesses grade a trial.

The first `submit`, or the first call after the episode's time limit, runs
`grade_episode`; every later one, concurrent ones included, gets the same finished
output, so a second grading can neither see a sandbox the first one changed nor give
the agent a second try. A grading that could not run (`GradingError`) is kept the same
way: every later call gets the same grading error, and the episode is not graded again.
"""

from __future__ import annotations

import abc
import asyncio

from orsbox.authoring.container import ContainerEnvironment
from orsbox.errors import GradingError
from orsbox.protocol.types import ToolOutput


class GradedOnce(ContainerEnvironment):
    _final: ToolOutput | GradingError | None = None
    _final_lock: asyncio.Lock | None = None

    @abc.abstractmethod
    async def grade_episode(self, note: str) -> ToolOutput:
        """Grade the sandbox as it is; the finished output, `note` (if any) first.
        Raises `GradingError` when the grader could not run."""

    async def final_output(self, note: str = "") -> ToolOutput:
        if self._final_lock is None:  # no await since the check: one lock per episode
            self._final_lock = asyncio.Lock()
        async with self._final_lock:
            if self._final is None:
                try:
                    self._final = await self.grade_episode(note)
                except GradingError as e:
                    self._final = e
        if isinstance(self._final, GradingError):
            raise GradingError(self._final.message, cause=self._final.cause)
        return self._final

    async def episode_timed_out(self, name: str) -> ToolOutput:
        return await self.final_output()
