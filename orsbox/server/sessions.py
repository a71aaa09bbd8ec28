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

Each session belongs to the client (token) that created it (`orsbox.server.owners`):
every lookup names the asking client (`owner`), and another client's session answers
exactly as an unknown one (404, the same text); a deleted one is 410 to its owner
only. `owner=None` is the server itself (the reaper, shutdown, a fork's cleanup). A
session is bound to its environment: a request on another environment's path is a 400
naming both (`env`).

A `/create` that names no environment, on a server of several without a default
(`create_unbound`; the ors-sdk client's `session(split=, index=)` sends no name),
starts nothing: the session's environment is the one its first request names by path
(`/ENV/prompt`, `/ENV/call`, ...: every request the ors-sdk client makes names it), and
only then is the task looked up and the setup started (`_bind`). Pings
keep it, as they keep a session; unnamed for `session_lease_s` after its last ping (or
`session_timeout_s`), it is dropped. No session ever serves an environment its client
did not name.

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
from orsbox.authoring.openreward_env import OpenRewardEnvironment
from orsbox.authoring.user_code import call_user
from orsbox.clock import SYSTEM_CLOCK, Clock, wait_for_event
from orsbox.errors import BadRequest, Gone, NotFound, ServiceUnavailable, SetupFailed
from orsbox.monitoring.logs import SESSION_ID
from orsbox.server.catalog import Catalog
from orsbox.server.cells import check_owned, mint
from orsbox.server.observer import Observer, SessionStats
from orsbox.server.owners import ANYONE, Owners, with_session_key
from orsbox.server.secrets import LIVE_SECRETS
from orsbox.settings import Settings

log = logging.getLogger("orsbox.sessions")


@dataclass(eq=False)
class Session:
    sid: str
    env_name: str
    env_cls: type[Environment]
    clock: Clock = SYSTEM_CLOCK
    owner: str = ANYONE  # the client that created it (`orsbox.server.owners`)
    last_active: float = 0.0  # any request naming it, pings included (set at creation)
    last_used: float = 0.0  # any request but a ping, or a call's end: idle since
    last_ping: float | None = None  # None: its client never pinged (no lease)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    call_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    env: Environment | None = None
    error: str | None = None
    # the setup refused the client's task (BadRequest: a task_spec naming no task of the
    # dataset): its requests answer 400, not a 500 marked as the host's failure
    error_is_clients: bool = False
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


@dataclass(eq=False)
class Unbound:
    """A `/create` waiting for a request to name its environment: its `task_spec`, or
    `split` and `index` to look the task up in that environment."""

    owner: str
    task_spec: dict[str, Any] | None
    split: str | None
    index: int | None
    secrets: dict[str, SecretStr]
    toolset: str | None
    created: float
    last_active: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SessionManager:
    def __init__(
        self,
        settings: Settings,
        context_extras: dict[str, Any] | None = None,
        observer: Observer | None = None,
        clock: Clock = SYSTEM_CLOCK,
        owners: Owners | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.owners = owners or Owners.from_settings(settings)
        self.context_extras = context_extras or {}
        self.sandbox_backend: Any = None
        self.observer = observer or Observer.unattached()
        self._sessions: dict[str, Session] = {}
        self._deleted: OrderedDict[str, str] = OrderedDict()  # id -> its owner
        self._reserved: dict[str, float] = {}  # id from /create_session -> deadline
        # Sessions still in setup, kept as they change rather than counted from all
        # sessions: /health and every /create read the count, and a host holds a
        # thousand live sessions (issue 36); a scan cost them 0.1 ms each.
        self._starting: dict[str, Session] = {}
        self._unbound: dict[str, Unbound] = {}  # see the module docstring
        self.catalog: Catalog | None = None  # what binds an unbound session (`create_app`)

    def __len__(self) -> int:
        return len(self._sessions)

    def live(self) -> list[Session]:
        """Every session not yet deleted, oldest first."""
        return list(self._sessions.values())

    # -- lookup ---------------------------------------------------------------------
    def get(
        self, sid: str, *, owner: str | None, ping: bool = False, env: str | None = None
    ) -> Session:
        """The session, its clock reset (its lease renewed, for a `ping`). 404 if never
        created or another client's, 410 if deleted (to its owner); 400 if `env`, the
        environment the request's path names, is not the session's."""
        session = self._sessions.get(sid)
        if session is None or not _owns(owner, session.owner):
            check_owned(sid, self.settings.cell)
            unbound = self._unbound.get(sid)
            if unbound is not None and _owns(owner, unbound.owner):
                raise BadRequest(
                    f"session {sid!r} names no environment yet: its /create named none; "
                    "a request on /ENV/... (prompt, task_tools, call) names it"
                )
            if sid in self._deleted and _owns(owner, self._deleted[sid]):
                raise Gone(f"session {sid!r} was deleted")
            raise NotFound(
                f"session {sid!r} not found (never created, or reaped: "
                f"{self.settings.session_lease_s:g}s after its client's last ping, or "
                f"{self.settings.session_timeout_s:g}s without requests)"
            )
        if env is not None and env != session.env_name:
            raise BadRequest(
                f"session {sid!r} is an episode of environment {session.env_name!r}, not "
                f"{env!r}: call it on /{session.env_name}/..."
            )
        session.touch(ping=ping)
        return session

    async def ready(self, sid: str, *, owner: str | None, env: str | None = None) -> Session:
        """The session once its setup has finished; see the module docstring. An unbound
        session of `owner` is bound to `env` first."""
        if sid in self._unbound and env is not None:
            await self._bind(sid, owner, env)
        session = self.get(sid, owner=owner, env=env)
        if not session.ready.is_set():  # the call path's common case costs no await
            await wait_for_event(self.clock, session.ready, self.settings.setup_wait_s)
        return self._check_ready(session)

    async def environment(
        self, sid: str, *, owner: str | None, env: str | None = None
    ) -> Environment:
        """The session's environment once ready (410 if deleted meanwhile)."""
        found = (await self.ready(sid, owner=owner, env=env)).env
        if found is None:
            raise Gone(f"session {sid!r} was deleted")
        return found

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
            raise (
                BadRequest(session.error)
                if session.error_is_clients
                else SetupFailed(session.error)
            )
        return session

    def ping(self, sid: str, *, owner: str | None) -> None:
        """`/ping`: renews the lease of a session (or an unbound one); the setup error
        once failed."""
        unbound = self._unbound.get(sid)
        if unbound is not None and _owns(owner, unbound.owner):
            unbound.last_active = self.clock.monotonic()
            return
        self.check_not_failed(self.get(sid, owner=owner, ping=True))

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
        owner: str = ANYONE,
    ) -> Session:
        """`start_from`: a fork's snapshot to start the sandbox from; `owner`: the client
        creating it."""
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
            owner=owner,
            observer=self.observer,
            grading_errors_as_zero=self.settings.grading_errors == "as-zero",
        )
        session.task_spec, session.secrets, session.toolset = task_spec, secrets, toolset
        session.start_from = start_from
        handed = self._with_key(session, secrets)
        session.secret_values = LIVE_SECRETS.add(handed)
        self._sessions[sid] = session
        self._starting[sid] = session
        self.observer.session_created(session, task_spec)
        session.setup_task = asyncio.create_task(self._setup(session, task_spec, handed, toolset))
        log.info("session %s created (environment %s)", sid, env_name)
        return session

    def create_unbound(
        self,
        sid: str,
        task_spec: dict[str, Any] | None,
        split: str | None,
        index: int | None,
        secrets: dict[str, SecretStr],
        toolset: str | None = None,
        *,
        owner: str = ANYONE,
    ) -> None:
        """A `/create` that named no environment on a server of several without a default:
        held (it takes a place in the limits) until a request names the environment."""
        if sid in self._sessions or sid in self._unbound:
            raise BadRequest(f"session {sid!r} already exists")
        check_owned(sid, self.settings.cell)
        self._reserved.pop(sid, None)
        self._check_capacity()
        self._deleted.pop(sid, None)
        now = self.clock.monotonic()
        self._unbound[sid] = Unbound(owner, task_spec, split, index, secrets, toolset, now, now)
        log.info("session %s created; its environment is named by its first request", sid)

    async def _bind(self, sid: str, owner: str | None, env: str) -> None:
        """Bind an unbound session of `owner` to environment `env`: look up its task there
        (a 400 for a split, index or toolset it does not have, the session staying
        unbound), then create it as `/create` would have. Another client's is left alone
        (`get` answers it: 404)."""
        unbound = self._unbound.get(sid)
        if unbound is None or not _owns(owner, unbound.owner) or self.catalog is None:
            return
        async with unbound.lock:
            if self._unbound.get(sid) is not unbound:  # a request before this one bound it
                return
            name, env_cls = self.catalog.get(env)
            check_toolset(name, env_cls, unbound.toolset)
            task_spec = unbound.task_spec
            if task_spec is None:
                assert unbound.split is not None and unbound.index is not None
                task_spec = await self.catalog.task(env_cls, unbound.split, unbound.index)
            if self._unbound.get(sid) is not unbound:  # deleted meanwhile
                return
            del self._unbound[sid]
            self.create(
                sid, name, env_cls, task_spec, unbound.secrets, unbound.toolset, owner=unbound.owner
            )

    def _with_key(self, session: Session, secrets: dict[str, SecretStr]) -> dict[str, SecretStr]:
        """The secrets the environment gets: an openreward environment's, when clients
        are kept apart and the sandbox API is served, carry a key of the session's own
        (`orsbox.server.owners`), so the sandboxes it creates count against its client.
        `session.secrets` keeps what the client sent (a fork mints a key of its own)."""
        if not (self.settings.sandbox_api and self.owners.apart):
            return secrets
        if not issubclass(session.env_cls, OpenRewardEnvironment):
            return secrets
        return with_session_key(secrets, self.owners.mint(session.owner, session.sid))

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
        live = len(self._sessions) + len(self._unbound)
        if live + reserved >= limits.max_sessions:
            held = f", and {reserved} ids handed out not yet created" if reserved else ""
            raise ServiceUnavailable(
                f"server at capacity: {live} live sessions (max "
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
            session.error_is_clients = isinstance(e, BadRequest)
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
    async def delete(
        self, sid: str, *, owner: str | None = None, reaped: str | None = None
    ) -> bool:
        """Tear the session down; True if there was one. Idempotent. A deleted id
        answers 410 afterwards; a reaped one (`reaped`: why) 404, as the spec says.
        Another client's session (`owner`) is left alone, as an unknown id is."""
        session = self._sessions.get(sid)
        if session is None or not _owns(owner, session.owner):
            check_owned(sid, self.settings.cell)
            unbound = self._unbound.get(sid)
            if unbound is not None and _owns(owner, unbound.owner):
                del self._unbound[sid]
                if not reaped:
                    self._remember_deleted(sid, unbound.owner)
                return True
            if session is None:
                self._reserved.pop(sid, None)
            return False
        del self._sessions[sid]
        if not reaped:
            self._remember_deleted(sid, session.owner)
        self._not_starting(session)
        session.closed = True
        if session.setup_task and not session.setup_task.done():
            session.setup_task.cancel()
            await asyncio.gather(session.setup_task, return_exceptions=True)
            session.ready.set()
        await self.observer.session_ending(session, reaped=reaped)
        await self._teardown(session)
        self.owners.revoke(sid)  # after the teardown: it may stop its sandboxes with the key
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

    def _remember_deleted(self, sid: str, owner: str) -> None:
        self._deleted[sid] = owner
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

    def _idle_unbound(self, now: float) -> dict[str, str]:
        """Unbound sessions no request named for the lease (pings included), or for the
        inactivity timeout since their /create."""
        found = {}
        for sid, unbound in self._unbound.items():
            if now - unbound.last_active > (self.settings.session_lease_s or float("inf")):
                found[sid] = "lease"
            elif now - unbound.created > self.settings.session_timeout_s:
                found[sid] = "inactivity"
        return found

    async def reap(self) -> dict[str, str]:
        """Delete every session `idle_sessions` names; what it deleted, and why."""
        idle = {**self.idle_sessions(), **self._idle_unbound(self.clock.monotonic())}
        for sid, why in idle.items():
            if why == "lease":
                log.info("session %s: no ping for %gs: reaping", sid, self.settings.session_lease_s)
            else:
                log.info("session %s idle for %gs: reaping", sid, self.settings.session_timeout_s)
        await asyncio.gather(*(self.delete(sid, reaped=why) for sid, why in idle.items()))
        return idle

    async def close_all(self) -> None:
        self._unbound.clear()
        await asyncio.gather(*(self.delete(sid) for sid in list(self._sessions)))


def check_toolset(name: str, env_cls: type[Environment], toolset: str | None) -> None:
    """400 for a `toolset_name` the environment does not offer."""
    if toolset is None:
        return
    offered = env_cls.toolsets_offered()
    if toolset in offered:
        return
    choices = f"toolsets: {', '.join(offered)}" if offered else "it offers no toolsets"
    raise BadRequest(f"unknown toolset {toolset!r} for environment {name!r}; {choices}")


def _owns(asking: str | None, owner: str) -> bool:
    """Whether the client `asking` (None: the server itself) may see a session of `owner`."""
    return asking is None or asking == owner


def _describe_setup_error(error: Exception, settings: Settings) -> str:
    if isinstance(error, TimeoutError):
        return f"setup failed: timed out after {settings.setup_timeout_s:g}s"
    return f"setup failed: {type(error).__name__}: {error}"
