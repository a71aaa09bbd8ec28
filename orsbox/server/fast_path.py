"""`CallFastPath`: tool calls that need no error answer skip FastAPI's request handling.

A tool call is the request an RL run makes thousands of times per episode. Profiled on
a trivial tool, FastAPI's routing and dependency solving were about half of the
server's CPU per call. This plain ASGI middleware, the innermost one (so access checks,
the body limit and bare-path routing have already run), answers `POST /{env}/call`
itself when the call can simply start: a known environment, a ready session of the
asking client and of that environment, a JSON body that is a valid `ToolCall` without
`task_id`. It then does exactly what the route does (`orsbox.server.routes.calls.call`).

Anything else — a missing header, bad JSON, an unknown environment or session, a
session still in setup, a reconnect — goes on to the FastAPI app with the body
replayed, so every error answer, wait and 503 comes from the one place that defines
it, and the fast path can only ever take requests the route would have served the
same way.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orsbox.errors import OrsboxError
from orsbox.protocol.calls import CallRecord, CallRegistry
from orsbox.protocol.types import ToolCall
from orsbox.server.catalog import Catalog
from orsbox.server.event_stream import EventStreamResponse
from orsbox.server.middleware import header
from orsbox.server.owners import Owners
from orsbox.server.routes.calls import renders_reason, run_call
from orsbox.server.sessions import Session, SessionManager
from orsbox.settings import Settings

CALL_SUFFIX = "/call"


class CallFastPath:
    def __init__(
        self,
        app: ASGIApp,
        catalog: Catalog,
        sessions: SessionManager,
        calls: CallRegistry,
        settings: Settings,
        owners: Owners,
    ) -> None:
        self.app = app
        self.catalog = catalog
        self.sessions = sessions
        self.calls = calls
        self.settings = settings
        self.owners = owners

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _is_call(scope):
            await self.app(scope, receive, send)
            return
        messages = await _read_body(receive)
        started = self._start(scope, messages)
        if started is None:
            await self.app(scope, _replay(messages, receive), send)
            return
        response = EventStreamResponse(
            started.first_events(),
            started.final_events,
            self.settings.keepalive_s,
            self.sessions.clock,
        )
        await response(scope, receive, send)

    def _start(self, scope: Scope, messages: list[Message]) -> CallRecord | None:
        """Start the call if it needs no error answer; None to leave it to the route."""
        sid = header(scope, b"x-session-id").strip()
        call = _tool_call(messages, header(scope, b"content-type"))
        if not sid or call is None or call.task_id is not None:
            return None
        owner = self.owners.of(scope["headers"])
        session = self._ready_session(scope["path"][1 : -len(CALL_SUFFIX)], sid, owner)
        if session is None:
            return None
        own_labels = renders_reason(header(scope, b"user-agent"))
        return self.calls.start(sid, lambda: run_call(session, call, labels_reasons=own_labels))

    def _ready_session(self, env_name: str, sid: str, owner: str) -> Session | None:
        try:
            name, _ = self.catalog.get(env_name)
            session = self.sessions.get(sid, owner=owner, env=name)
        except OrsboxError:
            return None
        if session.closed or not session.ready.is_set() or session.error is not None:
            return None
        return session


def _is_call(scope: Scope) -> bool:
    path: str = scope.get("path", "")
    return (
        scope["type"] == "http"
        and scope["method"] == "POST"
        and path.endswith(CALL_SUFFIX)
        and path.count("/") == 2
        and len(path) > len(CALL_SUFFIX) + 1
        and not scope.get("root_path")
    )


def _tool_call(messages: list[Message], content_type: str) -> ToolCall | None:
    """The body as FastAPI would read it (json.loads, then the model), or None."""
    media_type = content_type.split(";")[0].strip().lower()
    if messages[-1]["type"] != "http.request" or media_type != "application/json":
        return None
    body = b"".join(m.get("body", b"") for m in messages)
    if not body:
        return None
    try:
        return ToolCall.model_validate(json.loads(body))
    except Exception:  # anything the route answers as an error (even a RecursionError)
        return None


async def _read_body(receive: Receive) -> list[Message]:
    """Every message up to the end of the body (or a disconnect), as received."""
    messages = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
