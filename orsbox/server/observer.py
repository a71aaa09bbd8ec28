"""`Observer`: what the server tells the operator's tools at each step of a session.

The session manager and the call route report here — a session created, refused,
failed, ended; a prompt served; a call done — and the observer updates the metrics
and queues the episode record. Nothing here waits on disk or on the engine during a
call: a call costs a few counter updates and one queued record.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from orsbox.errors import GradingError, ImageNotFound, SandboxError, SandboxStartError
from orsbox.monitoring.episodes import EpisodeRecorder, default_path
from orsbox.monitoring.logs import SESSION_ID
from orsbox.monitoring.metrics import Metrics
from orsbox.protocol.types import RunToolError, RunToolSuccess, ToolCall
from orsbox.sandbox.usage import CALL_TALLY, ExecTally, ResourceUsage
from orsbox.server.secrets import LIVE_SECRETS
from orsbox.settings import Settings

if TYPE_CHECKING:
    from orsbox.server.sessions import Session

log = logging.getLogger("orsbox.observe")  # the name operators filter on; kept

USAGE_TIMEOUT_S = 5.0
# The sandbox API's `/run` in the call metrics: one environment label and one tool, not
# the name a client gives (any client could grow a metric without bound with those).
SANDBOX_API_ENVIRONMENT = "sandbox-api"
SANDBOX_API_TOOL = "run"


@dataclass
class SessionStats:
    """A session's usage while it lives; kept with its episode when it ends."""

    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: float = field(default_factory=time.time)
    calls: int = 0
    output_bytes: int = 0
    sandbox: ResourceUsage | None = None  # the last reading
    ended_at: float | None = None
    tool_names: set[str] | None = None  # the tools offered, for metric labels
    task: str = ""  # the task, redacted and short, for the status page
    prompt_recorded: bool = False
    grading_error: GradingError | None = None  # the grader could not run

    def as_dict(self) -> dict[str, Any]:
        end = self.ended_at or time.time()
        sandbox = self.sandbox
        return {
            "cpu_s": None if sandbox is None or sandbox.cpu_s is None else round(sandbox.cpu_s, 3),
            "peak_memory_bytes": None if sandbox is None else sandbox.peak_memory_bytes,
            "wall_s": round(end - self.started_at, 3),
            "calls": self.calls,
            "output_bytes": self.output_bytes,
        }


def outcome_of(tally: ExecTally, metadata: dict[str, Any] | None = None) -> str:
    """A call that answered: `timed_out` or `truncated` when a command it ran was (or
    its output's metadata says so), else `ok`."""
    metadata = metadata or {}
    if tally.timed_out or metadata.get("timed_out"):
        return "timed_out"
    if tally.truncated or metadata.get("truncated"):
        return "truncated"
    return "ok"


def failure_cause(error: BaseException) -> str:
    """A session failure's cause, as a metric label (a small fixed set)."""
    if isinstance(error, TimeoutError):
        return "setup_timeout"
    if isinstance(error, ImageNotFound):
        return "image_not_found"
    if isinstance(error, SandboxStartError):
        return "sandbox_start"
    if isinstance(error, SandboxError):
        return "sandbox"
    return "setup_error"


class Observer:
    def __init__(self, metrics: Metrics, recorder: EpisodeRecorder | None) -> None:
        self.metrics = metrics
        self.recorder = recorder

    @classmethod
    def from_settings(cls, settings: Settings) -> Observer:
        recorder = None
        if settings.record_episodes:
            recorder = EpisodeRecorder(
                settings.episodes_db or default_path(),
                output_cap_chars=settings.episodes_output_cap_chars,
                retention_days=settings.episodes_retention_days,
            )
        return cls(Metrics(), recorder)

    @classmethod
    @functools.cache
    def unattached(cls) -> Observer:
        """One observer for sessions no server watches (tests, in-process runs): it
        counts into a registry no one scrapes and records nothing."""
        return cls(Metrics(), None)

    def start(self) -> None:
        if self.recorder is not None and not self.recorder.start():
            self.recorder = None

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()

    # -- sessions ------------------------------------------------------------------------
    def session_created(self, session: Session, task_spec: dict[str, Any]) -> None:
        self.metrics.session_starts.labels(session.env_name).inc()
        task = LIVE_SECRETS.redact(json.dumps(task_spec, default=str))
        session.stats.task = task[:200]
        if self.recorder is not None:
            stats = session.stats
            self.recorder.episode_started(stats.episode_id, session.sid, session.env_name, task)

    def session_refused(self, env_name: str, cause: str) -> None:
        self.metrics.session_failures.labels(env_name, cause).inc()

    def setup_failed(self, session: Session, error: BaseException) -> None:
        self.metrics.session_failures.labels(session.env_name, failure_cause(error)).inc()

    def prompt_served(self, session: Session, prompt: Any) -> None:
        """The prompt as the agent got it (blocks or messages), the first time."""
        if self.recorder is not None and not session.stats.prompt_recorded:
            session.stats.prompt_recorded = True
            text = json.dumps(prompt, default=_plain)
            self.recorder.prompt(session.stats.episode_id, LIVE_SECRETS.redact(text))

    async def usage(self, session: Session) -> dict[str, Any]:
        """The session's usage now (reads its sandbox; bounded, never raises)."""
        read = getattr(session.env, "resource_usage", None)
        if read is not None:
            with anyio.move_on_after(USAGE_TIMEOUT_S):
                try:
                    session.stats.sandbox = await read() or session.stats.sandbox
                except Exception as e:  # accounting must never fail a session
                    log.warning("session %s: could not read usage: %s", session.sid, e)
        return session.stats.as_dict()

    async def session_ending(self, session: Session, *, reaped: str | None) -> None:
        """`reaped`: why the server ended it ("lease", "inactivity"); None if asked to."""
        """Before teardown: the final usage, kept with the episode."""
        session.stats.ended_at = time.time()
        usage = await self.usage(session)
        if reaped:
            self.metrics.sessions_reaped.labels(session.env_name, reaped).inc()
        if self.recorder is not None:
            # A sandbox that died under the episode (out of memory, killed) fails it.
            lost = getattr(session.env, "why_sandbox_lost", None)
            error = session.error or (LIVE_SECRETS.redact(lost) if lost else None)
            state = "reaped" if reaped else "ended"
            if error or session.stats.grading_error:
                state = "failed" if error else "grading_error"
            self.recorder.episode_ended(session.stats.episode_id, state, error, usage)

    def grading_failed(self, session: Session, error: GradingError) -> None:
        """The grader could not run: counted by cause, kept on the episode (its state,
        error and cause), whether the call answers an error or, as the operator may ask,
        a reward of 0.0."""
        self.metrics.grading_errors.labels(session.env_name, error.cause).inc()
        session.stats.grading_error = error
        if self.recorder is not None:
            message = LIVE_SECRETS.redact(error.wire())
            self.recorder.grading_error(session.stats.episode_id, error.cause, message)

    # -- calls ---------------------------------------------------------------------------
    def count_call(
        self, env_name: str, tool: str, outcome: str, duration_s: float, tally: ExecTally
    ) -> None:
        """One call in the metrics: by outcome, its time on the server, each command's
        time in the sandbox, the bytes output caps cut."""
        metrics = self.metrics
        metrics.tool_calls.labels(env_name, tool, outcome).inc()
        metrics.call_seconds.labels(env_name).observe(duration_s)
        for seconds in tally.durations_s:
            metrics.exec_seconds.labels(env_name).observe(seconds)
        if tally.capped_bytes:
            metrics.output_capped_bytes.labels(env_name).inc(tally.capped_bytes)

    @contextlib.contextmanager
    def sandbox_run(self) -> Iterator[None]:
        """Around one sandbox API `/run`: its command is tallied and the call counted as
        a session's tool calls are (environment `sandbox-api`, tool `run`); one that
        raises is `raised`."""
        tally = ExecTally()
        token = CALL_TALLY.set(tally)
        started, outcome = time.monotonic(), "raised"
        try:
            yield
            outcome = outcome_of(tally)
        finally:
            CALL_TALLY.reset(token)
            duration = time.monotonic() - started
            self.count_call(SANDBOX_API_ENVIRONMENT, SANDBOX_API_TOOL, outcome, duration, tally)

    @contextlib.contextmanager
    def call(self, session: Session, call: ToolCall) -> Iterator[CallWatch]:
        """Around one tool call: its log lines name the session, its sandbox commands
        are tallied, and what it did is counted and recorded when it ends."""
        watch = CallWatch(self, session, call)
        tokens = (SESSION_ID.set(session.sid), CALL_TALLY.set(watch.tally))
        try:
            yield watch
        finally:
            CALL_TALLY.reset(tokens[1])
            SESSION_ID.reset(tokens[0])


class CallWatch:
    """One call being watched: `done` or `raised` reports how it ended."""

    def __init__(self, observer: Observer, session: Session, call: ToolCall) -> None:
        self.observer = observer
        self.session = session
        self.call = call
        self.tally = ExecTally()
        self.grading_error: GradingError | None = None
        self.started = time.monotonic()
        self.started_at = time.time()

    def done(self, result: RunToolSuccess | RunToolError, payload: str) -> None:
        if isinstance(result, RunToolError):
            self._report("tool_error", payload, None, False, result.error)
            return
        output = result.output
        outcome = outcome_of(self.tally, output.metadata)
        self._report(outcome, payload, output.reward, output.finished, None)

    def raised(self, message: str) -> None:
        self._report("raised", None, None, False, message)

    def grading_failed(self, error: GradingError) -> None:
        """Before `raised` or `done`: the call's grader could not run."""
        self.grading_error = error
        self.observer.grading_failed(self.session, error)

    def _report(
        self,
        outcome: str,
        payload: str | None,
        reward: float | None,
        finished: bool,
        error: str | None,
    ) -> None:
        duration = time.monotonic() - self.started
        session = self.session
        if self.grading_error is not None:
            outcome = "grading_error"
        tool = self._tool_label()
        self.observer.count_call(session.env_name, tool, outcome, duration, self.tally)
        stats = session.stats
        stats.calls += 1
        stats.output_bytes += self.tally.output_bytes or len(payload or "")
        recorder = self.observer.recorder
        if recorder is not None:
            recorder.call(
                stats.episode_id,
                stats.calls,
                tool=self.call.name,
                tool_input=LIVE_SECRETS.redact(json.dumps(self.call.input, default=str)),
                output=payload,
                outcome=outcome,
                reward=reward,
                finished=finished,
                duration_s=duration,
                error=error,
                started_at=self.started_at,
            )

    def _tool_label(self) -> str:
        """The tool's name, or "unknown" for one the environment does not offer (an
        agent's made-up names must not grow the metric without bound)."""
        stats, env = self.session.stats, self.session.env
        if stats.tool_names is None and env is not None:
            stats.tool_names = {t.name for t in env.list_tools().tools} | set(env.callable_tools())
        return self.call.name if self.call.name in (stats.tool_names or ()) else "unknown"


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if dump is not None else str(value)
