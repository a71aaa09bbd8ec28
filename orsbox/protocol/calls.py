"""The reconnect buffer: tool calls that outlive the HTTP request that started them.

A call runs as its own asyncio task, so a client that disconnects does not cancel it.
Its final events stay here while it runs and for `linger_s` after it ends, so a client
that re-posts the call with the `task_id` it was given gets the result. A task id is
only found from the session that started it. The linger is measured on the registry's
clock (`orsbox.clock`), which a test may move by hand.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from orsbox.clock import SYSTEM_CLOCK, Clock

Event = dict[str, str]

RESULT_LINGER_S = 60.0

log = logging.getLogger("orsbox.calls")

# The task id of the call being run, within its task (for log lines, see orsbox.monitoring).
CURRENT_TASK_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "orsbox_task_id", default=None
)


@dataclass(eq=False)
class CallRecord:
    task_id: str
    session_id: str
    done: asyncio.Event = field(default_factory=asyncio.Event)
    events: list[Event] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def first_events(self) -> list[Event]:
        return [{"event": "task_id", "data": self.task_id}]

    async def final_events(self) -> list[Event]:
        """Once the call ends: its `chunk`.../`end` events, or one `error` event."""
        await self.done.wait()
        return self.events


class CallRegistry:
    def __init__(self, linger_s: float = RESULT_LINGER_S, clock: Clock = SYSTEM_CLOCK) -> None:
        self.linger_s = linger_s
        self.clock = clock
        self._calls: dict[str, CallRecord] = {}

    def start(self, session_id: str, run: Callable[[], Awaitable[list[Event]]]) -> CallRecord:
        """Start `run` (which returns the final events) as a detached task."""
        record = CallRecord(task_id=uuid.uuid4().hex, session_id=session_id)
        self._calls[record.task_id] = record
        record.task = asyncio.create_task(self._run(record, run))
        return record

    def find(self, task_id: str, session_id: str) -> CallRecord | None:
        record = self._calls.get(task_id)
        if record is None or record.session_id != session_id:
            return None
        return record

    def __len__(self) -> int:
        return len(self._calls)

    async def _run(self, record: CallRecord, run: Callable[[], Awaitable[list[Event]]]) -> None:
        CURRENT_TASK_ID.set(record.task_id)  # this task's own context: no reset needed
        try:
            record.events = await run()
        except asyncio.CancelledError:
            record.events = [
                {"event": "error", "data": "tool call cancelled: server shutting down"}
            ]
            raise
        except Exception as e:  # the runner converts tool errors; this is a server fault
            log.error("internal error in tool call %s", record.task_id, exc_info=e)
            record.events = [{"event": "error", "data": f"internal error: {type(e).__name__}"}]
        finally:
            record.done.set()
            self.clock.call_later(self.linger_s, lambda: self._calls.pop(record.task_id, None))

    async def cancel_all(self) -> None:
        tasks = [r.task for r in self._calls.values() if r.task and not r.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
