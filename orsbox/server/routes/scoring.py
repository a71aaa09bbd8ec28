"""`POST /{env}/score_group`: a group of candidate transcripts for one task, scored
together (GRPO-style or pairwise judging), delivered over SSE like a tool call.

It rides the session, so the environment's instance already holds the task, its setup
and its secrets (a judge's key). An environment that does not score groups answers 404
before any stream opens, as the reference server does, so a client can tell
"unsupported" from a judging failure (an SSE `error` event). Scoring takes its turn
with the session's tool calls (the session's FIFO call lock): a judge reading the
episode's state never sees a call half done, nor a call a scoring half done. It runs
detached from its request: a client that loses the connection re-posts with the
`task_id`. A scoring that fails is labelled as a failed tool call is, `[infra]`
included when the failure is the host's (a judge that could not run: `GradingError`).
"""

from __future__ import annotations

import logging

from fastapi import APIRouter

from orsbox.authoring.tools import is_infra_error, reason_of
from orsbox.authoring.user_code import call_user
from orsbox.errors import GradingError, NotFound
from orsbox.protocol.calls import Event
from orsbox.protocol.reasons import Reason, labelled
from orsbox.protocol.sse import result_events
from orsbox.protocol.types import GroupScore, ScoreGroup, ScoreGroupOutput
from orsbox.server.deps import (
    CallsDep,
    CatalogDep,
    OwnerDep,
    SessionIdDep,
    SessionsDep,
    SettingsDep,
)
from orsbox.server.event_stream import EventStreamResponse, detached_stream
from orsbox.server.openapi import SSE, errors
from orsbox.server.secrets import LIVE_SECRETS
from orsbox.server.sessions import Session

router = APIRouter()
log = logging.getLogger("orsbox.calls")


async def run_scoring(session: Session, body: ScoreGroup) -> list[Event]:
    """The final SSE events: the scores, or one `error` naming what went wrong."""
    with session.in_call():
        try:
            async with session.call_lock:
                if session.env is None:
                    return [_failed(Reason.SESSION_DELETED, "session was deleted", infra=True)]
                scores = await call_user(session.env.score_group, list(body.candidates))
            output = ScoreGroupOutput(scores=[_as_score(s) for s in scores])
            if len(output.scores) != len(body.candidates):
                raise ValueError(
                    f"score_group returned {len(output.scores)} scores for "
                    f"{len(body.candidates)} candidates"
                )
            return result_events(LIVE_SECRETS.redact(output.model_dump_json()))
        except GradingError as e:  # the judge could not run: no scores, not the model's
            log.warning("session %s: score_group could not grade: %s", session.sid, e)
            return [_failed(Reason.GRADING_ERROR, e.wire(), infra=True)]
        except Exception as e:
            log.warning("session %s: score_group failed: %s", session.sid, e)
            message = f"score_group failed: {type(e).__name__}: {e}"
            return [_failed(reason_of(e), message, infra=is_infra_error(e))]


def _failed(reason: Reason, message: str, *, infra: bool) -> Event:
    """The `error` event of a scoring that failed, labelled as a tool call's is
    (`reason: text`, `[infra]` first when the host failed: a judge that could not run,
    a sandbox that died; docs/infra-failures.md), secrets redacted."""
    return {"event": "error", "data": LIVE_SECRETS.redact(labelled(reason, message, infra=infra))}


def _as_score(score: GroupScore | float) -> GroupScore:
    if isinstance(score, GroupScore):
        return score
    if isinstance(score, int | float):
        return GroupScore(reward=float(score))
    return GroupScore.model_validate(score, from_attributes=True)


@router.post(
    "/{env_name}/score_group",
    response_class=EventStreamResponse,
    status_code=200,
    responses={**SSE, **errors(400, 404, 410, 413, 500, 503)},
)
async def score_group(
    env_name: str,
    body: ScoreGroup,
    sid: SessionIdDep,
    catalog: CatalogDep,
    sessions: SessionsDep,
    calls: CallsDep,
    settings: SettingsDep,
    owner: OwnerDep,
) -> EventStreamResponse:
    name, _ = catalog.get(env_name)
    session = await sessions.ready(sid, owner=owner, env=name)
    if session.env is None or not session.env.supports_score_group():
        raise NotFound(f"environment {name!r} does not implement score_group")
    run = lambda: run_scoring(session, body)  # noqa: E731
    return detached_stream(calls, sid, body.task_id, run, settings.keepalive_s, sessions.clock)
