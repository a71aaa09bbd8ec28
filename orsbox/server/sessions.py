"""Sessions: one environment instance per episode, from `/create` to teardown.

Life of a session:

    /create ──► starting ──setup ok──► ready ──/delete, timeout, shutdown──► closed
                    └──setup raised──► failed ──────────────┘

`/create` answers at once; `setup` runs as a background task. `/ping` answers during
setup; other requests wait for it at most `setup_wait_s`, then get 503 with
`Retry-After`. A failed setup makes every later request fail with its message. Deleted
ids are remembered (bounded) so they answer 410.

Sessions a client abandons are reaped (`idle_sessions`), and a session in setup or with a
tool call in flight never is:
* a session whose client pings (the openreward and ors-sdk clients, and so TRL's
  adapter, `POST /ping` every 10 s from a thread of their own for as long as they hold
  it) holds a lease: `session_lease_s` (60 s) after its last ping it is reaped. A model
  that takes minutes over a turn keeps its session, since its client keeps pinging;
  a trainer that exited (or was killed) without deleting stops pinging, and its
  sandboxes go a minute later instead of after the inactivity timeout;
* any other session is reaped after `session_timeout_s` (900 s) without a request.
The clock (`orsbox.clock`) is injectable (`SessionManager(clock=...)`): the lease, the
inactivity timeout, the reservations and the reaper's pace all read it, so tests move
time instead of waiting for it.

Ids come from `/create_session` (`new_id`): each names this server's cell
(`orsbox.server.cells`) and holds a place in the capacity limits until its `/create`
(at most `create_reservation_s`), so a cell behind a router that said yes has room.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic import SecretStr

from orsbox.authoring import Environment, EnvironmentContext
from orsbox.authoring.user_code import call_user
from orsbox.clock import SYSTEM_CLOCK, Clock, wait_for_event
from orsbox.errors import BadRequest, Gone, NotFound, ServiceUnavailable, SetupFailed
from orsbox.monitoring.logs import SESSION_ID
from orsbox.server.cells import check_owned, mint
from orsbox.server.observer import Observer, SessionStats
from orsbox.server.secrets import LIVE_SECRETS
from orsbox.settings import Settings

log = logging.getLogger("orsbox.sessions")


@dataclass(eq=False)
class Session:
    sid: str
    env_name: str
    env_cls: type[Environment]
    clock: Clock = SYSTEM_CLOCK
    last_active: float = 0.0  # any request naming it, pings included (set at creation)
    last_used: float = 0.0  # any request but a ping, or a call's end: idle since
    last_ping: float | None = None  # None: its client never pinged (no lease)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    call_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    env: Environment | None = None
    error: str | None = None
    calls_in_flight: int = 0
    secret_values: list[str] = field(default_factory=list)
    setup_task: asyncio.Task[None] | None = None
    closed: bool = False
    # What the session was made from, for a fork (`orsbox.server.forks`) to make more.
    task_spec: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, SecretStr] = field(default_factory=dict)
    toolset: str | None = None
    start_from: Any = None  # a fork's SharedSnapshot, released at teardown
    stats: SessionStats = field(default_factory=SessionStats)
    observer: Observer = field(default_factory=Observer.unattached)
    grading_errors_as_zero: bool = False  # Settings.grading_errors, read once at /create

    def __post_init__(self) -> None:
        self.last_active = self.last_used = self.clock.monotonic()

    def touch(self, *, ping: bool = False) -> None:
        """A request named the session now; a ping renews its lease without making it
        look used."""
        now = self.clock.monotonic()
        self.last_active = now
        if ping:
            self.last_ping = now
        else:
            self.last_used = now

    def idle_for(self, now: float) -> float | None:
        """Seconds since its last use, while ready with no call in flight; else None."""
        if self.calls_in_flight or self.state != "ready":
            return None
        return max(0.0, now - self.last_used)

    @contextlib.contextmanager
    def in_call(self) -> Iterator[None]:
        """While a call (or a scoring) runs: the reaper leaves the session alone, and its
        inactivity clock starts again when the call ends."""
        self.calls_in_flight += 1
        try:
            yield
        finally:
            self.calls_in_flight -= 1
            self.touch()

    @property
    def state(self) -> str:
        if self.closed:
            return "closed"
        if not self.ready.is_set():
            return "starting"
        return "failed" if self.error else "ready"


class SessionManager:
    def __init__(
        self,
        settings: Settings,
        context_extras: dict[str, Any] | None = None,
        observer: Observer | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.context_extras = context_extras or {}
        self.sandbox_backend: Any = None
        self.observer = observer or Observer.unattached()
        self._sessions: dict[str, Session] = {}
        self._deleted: OrderedDict[str, None] = OrderedDict()
        self._reserved: dict[str, float] = {}  # id from /create_session -> deadline
        # Sessions still in setup, kept as they change rather than counted from all
        # sessions: /health and every /create read the count, and a host holds a
        # thousand live sessions (issue 36); a scan cost them 0.1 ms each.
        self._starting: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def live(self) -> list[Session]:
        """Every session not yet deleted, oldest first."""
        return list(self._sessions.values())

    # -- lookup ---------------------------------------------------------------------
    def get(self, sid: str, *, ping: bool = False) -> Session:
        """The session, its clock reset (its lease renewed, for a `ping`). 404 if never
        created, 410 if deleted."""
        session = self._sessions.get(sid)
        if session is None:
            check_owned(sid, self.settings.cell)
            if sid in self._deleted:
                raise Gone(f"session {sid!r} was deleted")
            raise NotFound(
                f"session {sid!r} not found (never created, or reaped: "
                f"{self.settings.session_lease_s:g}s after its client's last ping, or "
                f"{self.settings.session_timeout_s:g}s without requests)"
            )
        session.touch(ping=ping)
        return session

    async def ready(self, sid: str) -> Session:
        """The session once its setup has finished; see the module docstring."""
        session = self.get(sid)
        if not session.ready.is_set():  # the call path's common case costs no await
            await wait_for_event(self.clock, session.ready, self.settings.setup_wait_s)
        return self._check_ready(session)

    async def environment(self, sid: str) -> Environment:
        """The session's environment once ready (410 if deleted meanwhile)."""
        env = (await self.ready(sid)).env
        if env is None:
            raise Gone(f"session {sid!r} was deleted")
        return env

    def _check_ready(self, session: Session) -> Session:
        if session.closed:
            raise Gone(f"session {session.sid!r} was deleted")
        if not session.ready.is_set():
            raise ServiceUnavailable(
                "environment setup is still running; retry shortly",
                headers={
                    "Retry-After": str(self.settings.setup_retry_after_s),
                    "X-Backend-State": "starting",
                },
            )
        if session.error is not None:
            raise SetupFailed(session.error)
        return session

    def check_not_failed(self, session: Session) -> None:
        """For `/ping`: fine while starting or ready, the setup error once failed."""
        if session.ready.is_set():
            self._check_ready(session)

    # -- create ---------------------------------------------------------------------
    def new_id(self) -> str:
        """A session id of this cell for `/create_session`, holding a place in the
        capacity limits until its `/create`; 503 with Retry-After when there is none."""
        self._check_capacity()
        sid = mint(self.settings.cell)
        self._reserved[sid] = self.clock.monotonic() + self.settings.create_reservation_s
        return sid

    def _reservations(self) -> int:
        """Ids handed out and not yet created, dropping the expired ones."""
        now = self.clock.monotonic()
        for sid in [s for s, deadline in self._reserved.items() if deadline < now]:
            del self._reserved[sid]
        return len(self._reserved)

    def load(self) -> dict[str, int]:
        """For `/health`: what a router or an operator weighs this cell by."""
        reserved = self._reservations()
        starting = len(self._starting)
        return {
            "sessions": len(self._sessions),
            "starting": starting,
            "reserved": reserved,
            "max_sessions": self.settings.max_sessions,
            "max_starting": self.settings.max_starting,
        }

    def create(
        self,
        sid: str,
        env_name: str,
        env_cls: type[Environment],
        task_spec: dict[str, Any],
        secrets: dict[str, SecretStr],
        toolset: str | None = None,
        start_from: Any = None,
    ) -> Session:
        """`start_from`: a fork's snapshot to start the sandbox from."""
        if sid in self._sessions:
            raise BadRequest(f"session {sid!r} already exists")
        check_owned(sid, self.settings.cell)
        self._reserved.pop(sid, None)
        try:
            self._check_capacity()
        except ServiceUnavailable:
            self.observer.session_refused(env_name, "capacity")
            raise
        self._deleted.pop(sid, None)
        session = Session(
            sid=sid,
            env_name=env_name,
            env_cls=env_cls,
            clock=self.clock,
            observer=self.observer,
            grading_errors_as_zero=self.settings.grading_errors == "as-zero",
        )
        session.task_spec, session.secrets, session.toolset = task_spec, secrets, toolset
        session.start_from = start_from
        session.secret_values = LIVE_SECRETS.add(secrets)
        self._sessions[sid] = session
        self._starting[sid] = session
        self.observer.session_created(session, task_spec)
        session.setup_task = asyncio.create_task(self._setup(session, task_spec, secrets, toolset))
        log.info("session %s created (environment %s)", sid, env_name)
        return session

    def has_room(self) -> bool:
        """Whether a new session would be taken now (`/health?room=1`: a router that
        places by image takes a full cell out of that placement, docs/cluster.md)."""
        try:
            self._check_capacity()
        except ServiceUnavailable:
            return False
        return True

    def _not_starting(self, session: Session) -> None:
        """`session`'s setup ended (or it was deleted): no longer counted as starting (a
        new session given the same id meanwhile still is)."""
        if self._starting.get(session.sid) is session:
            del self._starting[session.sid]

    def _check_capacity(self) -> None:
        """503 past the configured limits, before anything is started: an overloaded
        Docker engine or machine helps no one, and the client can retry."""
        limits = self.settings
        retry = {"Retry-After": str(limits.capacity_retry_after_s)}
        reserved = self._reservations()
        if len(self._sessions) + reserved >= limits.max_sessions:
            held = f", and {reserved} ids handed out not yet created" if reserved else ""
            raise ServiceUnavailable(
                f"server at capacity: {len(self._sessions)} live sessions (max "
                f"{limits.max_sessions}){held}; delete finished sessions or retry later",
                headers=retry,
            )
        starting = reserved + len(self._starting)
        if starting >= limits.max_starting:
            raise ServiceUnavailable(
                f"server busy: {starting} sessions are starting (max {limits.max_starting}); "
                "retry shortly",
                headers=retry,
            )

    async def _setup(
        self,
        session: Session,
        task_spec: dict[str, Any],
        secrets: dict[str, SecretStr],
        toolset: str | None,
    ) -> None:
        started = time.monotonic()
        SESSION_ID.set(session.sid)  # the setup task's own context
        try:
            with anyio.fail_after(self.settings.setup_timeout_s):
                await self._construct_and_setup(session, task_spec, secrets, toolset)
            log.info("session %s ready in %.3fs", session.sid, time.monotonic() - started)
        except Exception as e:
            self.observer.setup_failed(session, e)
            session.error = LIVE_SECRETS.redact(_describe_setup_error(e, self.settings))
            log.warning("session %s setup failed: %s", session.sid, session.error)
            await self._teardown(session)
        finally:
            session.touch()
            session.ready.set()
            self._not_starting(session)

    async def _construct_and_setup(
        self,
        session: Session,
        task_spec: dict[str, Any],
        secrets: dict[str, SecretStr],
        toolset: str | None,
    ) -> None:
        plain = {k: v.get_secret_value() for k, v in secrets.items()}
        env = await call_user(session.env_cls, task_spec=task_spec, secrets=plain)
        env.orsbox_context = EnvironmentContext(
            session_id=session.sid,
            sandbox_backend=self.sandbox_backend,
            settings=self.settings,
            extras=self.context_extras,
            start_from=session.start_from,
            clock=self.clock,
        )
        session.env = env
        if toolset is not None:
            await call_user(env.select_toolset, toolset)
        await call_user(env.setup)

    # -- delete ---------------------------------------------------------------------
    async def delete(self, sid: str, *, reaped: str | None = None) -> bool:
        """Tear the session down; True if there was one. Idempotent. A deleted id
        answers 410 afterwards; a reaped one (`reaped`: why) 404, as the spec says."""
        session = self._sessions.pop(sid, None)
        if session is None:
            check_owned(sid, self.settings.cell)
            self._reserved.pop(sid, None)
            return False
        if not reaped:
            self._remember_deleted(sid)
        self._not_starting(session)
        session.closed = True
        if session.setup_task and not session.setup_task.done():
            session.setup_task.cancel()
            await asyncio.gather(session.setup_task, return_exceptions=True)
            session.ready.set()
        await self.observer.session_ending(session, reaped=reaped)
        await self._teardown(session)
        LIVE_SECRETS.remove(session.secret_values)
        log.info("session %s deleted", sid)
        return True

    async def _teardown(self, session: Session) -> None:
        env, session.env = session.env, None
        if env is not None:
            try:
                with anyio.fail_after(self.settings.teardown_timeout_s):
                    await call_user(env.teardown)
            except Exception as e:
                message = LIVE_SECRETS.redact(repr(e))
                log.warning("session %s teardown failed: %s", session.sid, message)
        start_from, session.start_from = session.start_from, None
        if start_from is not None:  # its sandbox is gone: the fork's image may go too
            await start_from.release()

    def _remember_deleted(self, sid: str) -> None:
        self._deleted[sid] = None
        while len(self._deleted) > self.settings.max_deleted_remembered:
            self._deleted.popitem(last=False)

    # -- reaping --------------------------------------------------------------------
    def idle_sessions(self, now: float | None = None) -> dict[str, str]:
        """Sessions to reap, each with why (see the module docstring): "lease" (its
        client stopped pinging) or "inactivity". One still in setup is not idle
        (requests may be waiting for it; `setup_timeout_s` bounds it): its clocks
        start when the setup ends."""
        now = self.clock.monotonic() if now is None else now
        found = {}
        for s in self._sessions.values():
            if s.calls_in_flight or not s.ready.is_set():
                continue
            why = self._expired(s, now)
            if why is not None:
                found[s.sid] = why
        return found

    def _expired(self, session: Session, now: float) -> str | None:
        lease = self.settings.session_lease_s
        if lease and session.last_ping is not None and now - session.last_ping > lease:
            return "lease"
        if now - session.last_active > self.settings.session_timeout_s:
            return "inactivity"
        return None

    async def reap_forever(self) -> None:
        while True:
            await self.clock.sleep(self.settings.reap_interval_s)
            await self.reap()

    async def reap(self) -> dict[str, str]:
        """Delete every session `idle_sessions` names; what it deleted, and why."""
        idle = self.idle_sessions()
        for sid, why in idle.items():
            if why == "lease":
                log.info("session %s: no ping for %gs: reaping", sid, self.settings.session_lease_s)
            else:
                log.info("session %s idle for %gs: reaping", sid, self.settings.session_timeout_s)
        await asyncio.gather(*(self.delete(sid, reaped=why) for sid, why in idle.items()))
        return idle

    async def close_all(self) -> None:
        await asyncio.gather(*(self.delete(sid) for sid in list(self._sessions)))


def _describe_setup_error(error: Exception, settings: Settings) -> str:
    if isinstance(error, TimeoutError):
        return f"setup failed: timed out after {settings.setup_timeout_s:g}s"
    return f"setup failed: {type(error).__name__}: {error}"
