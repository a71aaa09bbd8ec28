"""Episode lifecycle: session ids, `/create`, `/ping`, `/delete`, prompt and task tools."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Request
from fastapi.responses import JSONResponse

from orsbox.authoring.user_code import call_user
from orsbox.errors import BadRequest
from orsbox.protocol.types import (
    Blocks,
    CreateSession,
    ListToolsOutput,
    Message,
    SessionId,
    Status,
)
from orsbox.server.catalog import Catalog, NoEnvironmentNamed
from orsbox.server.clients import is_openreward
from orsbox.server.deps import CatalogDep, OwnerDep, SessionIdDep, SessionsDep
from orsbox.server.event_stream import EventStreamResponse
from orsbox.server.openapi import SSE, errors
from orsbox.server.routes import sandboxes
from orsbox.server.secrets import merge_secrets
from orsbox.server.sessions import SessionManager, check_toolset

router = APIRouter()
SESSION_ERRORS = errors(400, 404, 410, 500, 503)  # no session, deleted, setup failed/running


@router.post("/create_session", response_model=SessionId, responses={**SSE, **errors(413, 503)})
async def create_session(
    request: Request, sessions: SessionsDep
) -> JSONResponse | EventStreamResponse:
    """A fresh session id naming this cell: SSE (`task_id`, then `end` with
    `{"sid": ...}`) for clients that accept `text/event-stream`, plain JSON otherwise.
    503 with Retry-After when the cell is full, so a router places it on another."""
    sid = sessions.new_id()
    if "text/event-stream" not in request.headers.get("accept", ""):
        return JSONResponse({"sid": sid})

    events = [
        {"event": "task_id", "data": sid},
        {"event": "end", "data": SessionId(sid=sid).model_dump_json()},
    ]
    return EventStreamResponse(events, None, 0)


@router.post(
    "/create",
    responses=errors(400, 404, 413, 503),
    openapi_extra={"requestBody": {"required": True}},
)
async def create(
    sid: SessionIdDep,
    catalog: CatalogDep,
    sessions: SessionsDep,
    owner: OwnerDep,
    body: Annotated[CreateSession | None, Body()] = None,
    x_secrets: Annotated[str | None, Header()] = None,
    x_deployment: Annotated[str | None, Header()] = None,
    user_agent: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> SessionId:
    """The environment: `env_name`, else the one `X-Deployment` names (the openreward
    client's only mention of it), else the default (`Catalog.resolve`): the only one
    served, or the operator's `ORSBOX_DEFAULT_ENVIRONMENT`. On a server of several
    without one, none: the session's first request names it by its path (the ors-sdk
    client's way: `/ENV/prompt`, `/ENV/call`), and its setup starts then. The session
    belongs to the client creating it."""
    if body is None:
        raise BadRequest("body must give either task_spec or split and index")
    secrets = merge_secrets(body.secrets, x_secrets)
    variant = is_openreward(user_agent)
    try:
        name, env_cls = catalog.get(catalog.resolve(body.env_name, x_deployment, variant=variant))
    except NoEnvironmentNamed:  # bound by the session's first request (`SessionManager`)
        if body.split is not None and body.index is not None:
            await _check_task_anywhere(catalog, body.split, body.index)
        sessions.create_unbound(
            sid, body.task_spec, body.split, body.index, secrets, body.toolset_name, owner=owner
        )
        return SessionId(sid=sid)
    check_toolset(name, env_cls, body.toolset_name)
    if body.task_spec is not None:
        task_spec = body.task_spec
    else:
        assert body.split is not None and body.index is not None
        task_spec = await catalog.task(env_cls, body.split, body.index)
    sessions.create(sid, name, env_cls, task_spec, secrets, body.toolset_name, owner=owner)
    return SessionId(sid=sid)


async def _check_task_anywhere(catalog: Catalog, split: str, index: int) -> None:
    """400 at once when no served environment has task `index` of `split` (what the
    session's first request would find, whichever environment it names)."""
    errors: list[str] = []
    for name in catalog.names:
        _, env_cls = catalog.get(name)
        if split not in [s.name for s in await catalog.splits(env_cls)]:
            continue
        try:
            await catalog.task(env_cls, split, index)
            return
        except BadRequest as e:
            errors.append(f"{name}: {e}")
    found = "; ".join(errors) or f"unknown split {split!r}"
    raise BadRequest(f"no environment served here has this task ({found})")


@router.post("/ping", responses=errors(400, 404, 410, 413, 500))
async def ping(request: Request, sid: SessionIdDep, sessions: SessionsDep, owner: OwnerDep) -> Any:
    if _is_api_sandbox(request, sid):
        return await sandboxes.ping_sandbox(request, sid)
    sessions.ping(sid, owner=owner)  # renews its lease
    return Status(status="ok")


@router.post("/delete", responses=errors(400, 413))
async def delete(sid: SessionIdDep, sessions: SessionsDep, owner: OwnerDep) -> SessionId:
    """Idempotent: 200 for any id, so client cleanup never masks an earlier error; another
    client's session is left alone, as an unknown id is."""
    await sessions.delete(sid, owner=owner)
    return SessionId(sid=sid)


@router.post("/delete_session", responses=errors(400, 413))
async def delete_session(
    request: Request, sid: SessionIdDep, sessions: SessionsDep, owner: OwnerDep
) -> Any:
    """Ends an ORS session, or a sandbox of the sandbox API (the openreward client
    stops a sandbox this way)."""
    if _is_api_sandbox(request, sid):
        return await sandboxes.delete_sandbox(request, sid)
    await sessions.delete(sid, owner=owner)
    return SessionId(sid=sid)


def _is_api_sandbox(request: Request, sid: str) -> bool:
    manager = getattr(request.app.state, "sandbox_api", None)
    return manager is not None and manager.is_sandbox_id(sid)


@router.get("/{env_name}/prompt", responses=SESSION_ERRORS)
async def prompt(
    env_name: str, sid: SessionIdDep, catalog: CatalogDep, sessions: SessionsDep, owner: OwnerDep
) -> Blocks:
    """The path must name the session's environment (400 naming both otherwise)."""
    name, _ = catalog.get(env_name)
    env = await sessions.environment(sid, owner=owner, env=name)
    blocks = await call_user(env.get_prompt)
    _prompt_served(sessions, sid, owner, blocks)
    return blocks


@router.get("/{env_name}/messages", responses=SESSION_ERRORS)
async def messages(
    env_name: str, sid: SessionIdDep, catalog: CatalogDep, sessions: SessionsDep, owner: OwnerDep
) -> list[Message]:
    """The prompt as role/blocks messages (`Environment.messages`)."""
    name, _ = catalog.get(env_name)
    env = await sessions.environment(sid, owner=owner, env=name)
    found = list(await call_user(env.messages))
    _prompt_served(sessions, sid, owner, found)
    return found


def _prompt_served(sessions: SessionManager, sid: str, owner: str, prompt: Any) -> None:
    """Record the prompt as the agent got it (the episode record keeps the first)."""
    session = sessions.get(sid, owner=owner)
    session.observer.prompt_served(session, prompt)


@router.get("/{env_name}/task_tools", responses=SESSION_ERRORS)
async def task_tools(
    env_name: str, sid: SessionIdDep, catalog: CatalogDep, sessions: SessionsDep, owner: OwnerDep
) -> ListToolsOutput:
    name, _ = catalog.get(env_name)
    env = await sessions.environment(sid, owner=owner, env=name)
    shared = env.list_tools()
    specific = await call_user(env.list_task_tools)
    return ListToolsOutput(
        tools=[*shared.tools, *specific.tools],
        terminal_tool=specific.terminal_tool or shared.terminal_tool,
        supports_score_group=shared.supports_score_group,
    )
