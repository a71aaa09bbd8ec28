"""The reconnect buffer: tool calls that outlive the HTTP request that started them.

A call runs as its own asyncio task, so a client that disconnects does not cancel it.
Its final events stay here while it runs and for `linger_s` after it ends, so a client
that re-posts the call with the `task_id` it was given gets the result. A task id is
only found from the session that started it. The linger is measured on the registry's
clock (`orsbox.clock`), which a test may move by hand.

A finished call is kept as a tuple of strings, which the cyclic GC stops tracking at
its first pass: at 600 calls a second the buffer holds 36,000 results. When each kept
its task, coroutine, context, `asyncio.Event` and linger timer
(15 to 17 tracked objects), they were most of what the server's full collections
walked; promoted by the thousand each second, they set a full pass off every two
seconds, each holding the loop for 166-515 ms at 1,000 live episodes
(docs/operating/sizing.md). Expiry is one deque in end order, pruned as calls start
and are looked up.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from orsbox.clock import SYSTEM_CLOCK, Clock
from orsbox.protocol.reasons import Reason, labelled

Event = dict[str, str]

RESULT_LINGER_S = 60.0

log = logging.getLogger("orsbox.calls")

# The task id of the call being run, within its task (for log lines, see orsbox.monitoring).
CURRENT_TASK_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "orsbox_task_id", default=None
)


class _Reconnectable:
    """What a running and a finished call share: the stream starts with the task id a
    client re-posts to reconnect."""

    task_id: str

    def first_events(self) -> list[Event]:
        return [{"event": "task_id", "data": self.task_id}]


@dataclass(eq=False)
class CallRecord(_Reconnectable):
    """A call while it runs."""

    task_id: str
    session_id: str
    done: asyncio.Event = field(default_factory=asyncio.Event)
    events: list[Event] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def final_events(self) -> list[Event]:
        """Once the call ends: its `chunk`.../`end` events, or one `error` event."""
        await self.done.wait()
        return self.events


@dataclass(frozen=True)
class FinishedCall(_Reconnectable):
    """A call's result, as the registry hands it to a client that reconnects."""

    task_id: str
    events: list[Event]

    async def final_events(self) -> list[Event]:
        return self.events


# A kept result: (session id, event, data, event, data...), one flat tuple of strings,
# which CPython's collector untracks at its first pass. Not a NamedTuple, nor a tuple
# holding a dict or another tuple: the collector keeps tracking those.
_Kept = tuple[str, ...]


class CallRegistry:
    def __init__(self, linger_s: float = RESULT_LINGER_S, clock: Clock = SYSTEM_CLOCK) -> None:
        self.linger_s = linger_s
        self.clock = clock
        self._running: dict[str, CallRecord] = {}
        self._kept: dict[str, _Kept] = {}
        self._expiry: deque[tuple[float, str]] = deque()  # (when, task id), in end order

    def start(self, session_id: str, run: Callable[[], Awaitable[list[Event]]]) -> CallRecord:
        """Start `run` (which returns the final events) as a detached task."""
        self._forget_expired()
        record = CallRecord(task_id=uuid.uuid4().hex, session_id=session_id)
        self._running[record.task_id] = record
        record.task = asyncio.create_task(self._run(record, run))
        return record

    def find(self, task_id: str, session_id: str) -> CallRecord | FinishedCall | None:
        self._forget_expired()
        record = self._running.get(task_id)
        if record is not None:
            return record if record.session_id == session_id else None
        kept = self._kept.get(task_id)
        if kept is None or kept[0] != session_id:
            return None
        pairs = zip(kept[1::2], kept[2::2], strict=True)
        return FinishedCall(task_id, [{"event": e, "data": d} for e, d in pairs])

    def __len__(self) -> int:
        self._forget_expired()
        return len(self._running) + len(self._kept)

    def _forget_expired(self) -> None:
        now = self.clock.monotonic()
        while self._expiry and self._expiry[0][0] <= now:
            del self._kept[self._expiry.popleft()[1]]

    def _keep(self, record: CallRecord) -> None:
        """From running to kept, until the linger ends."""
        flat = (text for event in record.events for text in (event["event"], event["data"]))
        self._kept[record.task_id] = (record.session_id, *flat)
        self._expiry.append((self.clock.monotonic() + self.linger_s, record.task_id))
        del self._running[record.task_id]

    async def _run(self, record: CallRecord, run: Callable[[], Awaitable[list[Event]]]) -> None:
        CURRENT_TASK_ID.set(record.task_id)  # this task's own context: no reset needed
        try:
            record.events = await run()
        except asyncio.CancelledError:
            shutdown = "tool call cancelled: server shutting down"
            record.events = [_host_error(shutdown)]
            raise
        except Exception as e:  # the runner converts tool errors; this is a server fault
            log.error("internal error in tool call %s", record.task_id, exc_info=e)
            record.events = [_host_error(f"internal error: {type(e).__name__}")]
        finally:
            record.done.set()
            self._keep(record)

    async def cancel_all(self) -> None:
        tasks = [r.task for r in self._running.values() if r.task and not r.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _host_error(text: str) -> Event:
    """An `error` event of the host's own failure, marked `[infra]`: not the model's."""
    return {"event": "error", "data": labelled(Reason.SERVER_ERROR, text, infra=True)}
