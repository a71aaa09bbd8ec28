"""`POST /{env}/call`: run a tool and deliver its result over Server-Sent Events.

Calls within a session run one at a time in arrival order (the session's FIFO lock).
Each call runs detached from its request (see `orsbox.protocol.calls`), so a dropped
connection neither cancels it nor loses its result: re-post with the `task_id`.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Header

from orsbox.authoring import ToolRaised, as_zero_reward, call_tool
from orsbox.errors import GradingError
from orsbox.protocol.calls import Event
from orsbox.protocol.reasons import Reason, labelled
from orsbox.protocol.sse import result_events
from orsbox.protocol.types import RunToolError, RunToolSuccess, ToolCall
from orsbox.server.clients import is_openreward
from orsbox.server.deps import (
    CallsDep,
    CatalogDep,
    OwnerDep,
    SessionIdDep,
    SessionsDep,
    SettingsDep,
)
from orsbox.server.event_stream import EventStreamResponse, detached_stream
from orsbox.server.observer import CallWatch
from orsbox.server.openapi import SSE, errors
from orsbox.server.secrets import LIVE_SECRETS
from orsbox.server.sessions import Session

router = APIRouter()
log = logging.getLogger("orsbox.calls")


async def run_call(
    session: Session, call: ToolCall, *, labels_reasons: bool = False
) -> list[Event]:
    """The final SSE events of one call: `chunk`.../`end` with the result, or `error`
    labelled with its reason (`orsbox.protocol.reasons`). A grader that could not run
    (`GradingError`) is reported to the observer as it is (the metric, the episode's
    record) and answers `error` with its wire text naming the cause, or a reward of 0.0
    when the operator asked for that (`--grading-errors as-zero`). `labels_reasons`:
    the client writes an `ok: false` answer's `reason` before its text itself
    (`renders_reason`)."""
    with session.in_call(), session.observer.call(session, call) as watch:
        try:
            async with session.call_lock:
                if session.env is None:
                    deleted = "session was deleted"
                    return [_error_event(Reason.SESSION_DELETED, deleted, infra=True)]
                result = await call_tool(session.env, call.name, call.input)
        except GradingError as e:
            watch.grading_failed(e)
            if not session.grading_errors_as_zero:  # an outcome, not a bug: no trace
                return _error(
                    session, watch, Reason.GRADING_ERROR, e.wire(), trace=None, infra=True
                )
            result = RunToolSuccess(output=as_zero_reward(e))
        except ToolRaised as e:
            return _error(session, watch, e.reason, str(e), trace=e.__cause__, infra=e.infra)
        if isinstance(result, RunToolError) and result.reason and not labels_reasons:
            result = result.model_copy(update={"error": labelled(result.reason, result.error)})
        payload = LIVE_SECRETS.redact(result.model_dump_json())
        watch.done(result, payload)
        return result_events(payload)


def _error(
    session: Session,
    watch: CallWatch,
    reason: Reason,
    text: str,
    trace: BaseException | None,
    *,
    infra: bool,
) -> list[Event]:
    """The call's `error` event: logged (with the tool's own exception, if any), counted
    and recorded, secrets redacted, labelled with its reason, marked `[infra]` when the
    failure is not the model's (`orsbox.protocol.reasons`)."""
    log.warning("session %s: %s", session.sid, text, exc_info=trace)
    message = LIVE_SECRETS.redact(text)
    watch.raised(message)
    return [_error_event(reason, message, infra=infra)]


def _error_event(reason: Reason, message: str, *, infra: bool) -> Event:
    return {"event": "error", "data": labelled(reason, message, infra=infra)}


def renders_reason(user_agent: str) -> bool:
    """Whether the client shows an `ok: false` answer as `reason: error` itself: the
    `openreward` client does (it says so in its User-Agent); ors-sdk and others show
    `error` alone, so they get the label in the text."""
    return is_openreward(user_agent)


@router.post(
    "/{env_name}/call",
    response_class=EventStreamResponse,
    status_code=200,
    responses={**SSE, **errors(400, 404, 410, 413, 500, 503)},
)
async def call(
    env_name: str,
    body: ToolCall,
    sid: SessionIdDep,
    catalog: CatalogDep,
    sessions: SessionsDep,
    calls: CallsDep,
    settings: SettingsDep,
    owner: OwnerDep,
    user_agent: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> EventStreamResponse:
    """The path must name the session's environment (400 naming both otherwise);
    another client's session, a reconnect by `task_id` included, is a 404."""
    name, _ = catalog.get(env_name)
    session = await sessions.ready(sid, owner=owner, env=name)
    own_labels = renders_reason(user_agent or "")
    run = lambda: run_call(session, body, labels_reasons=own_labels)  # noqa: E731
    return detached_stream(calls, sid, body.task_id, run, settings.keepalive_s, sessions.clock)
