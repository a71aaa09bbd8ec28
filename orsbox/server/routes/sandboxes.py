"""The sandbox API's routes, wire-compatible with the `openreward` client (0.1.167).

Every call but `/create_sandbox` names its sandbox in `X-Session-ID`; `/ping` and
`/delete_session` are shared with ORS sessions and hand sandbox ids (`sbx-...`) here
(`orsbox.server.routes.sessions`). Registered only when `ORSBOX_SANDBOX_API=1`.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse, Response

from orsbox.errors import BadRequest, Misdirected, OrsboxError, SandboxError
from orsbox.protocol.calls import Event
from orsbox.protocol.sse import result_events
from orsbox.server.deps import CallsDep, SessionIdDep, SettingsDep
from orsbox.server.event_stream import EventStreamResponse, detached_stream
from orsbox.server.openapi import SSE, errors
from orsbox.server.owners import Owners
from orsbox.server.policy import (
    check_backend_network,
    check_sandbox_image,
    check_sandbox_network,
    image_mapping,
)
from orsbox.server.sandbox_api import files
from orsbox.server.sandbox_api.manager import ApiSandbox, SandboxManager
from orsbox.server.sandbox_api.request import NetworkPolicy, RunRequest, SandboxRequest, truthy
from orsbox.settings import Settings

router = APIRouter()
log = logging.getLogger("orsbox.sandbox_api")
ERRORS = errors(400, 403, 404, 410, 413, 503)
TIMED_OUT_EXIT = 124  # what `timeout(1)` exits with; the client reads `timed_out` too


def manager_of(request: Request) -> SandboxManager:
    return request.app.state.sandbox_api


def owner(request: Request) -> str:
    """The client asking (`orsbox.server.owners`): a token's name, or the client of the
    session whose environment presents the session's key."""
    owners: Owners = request.app.state.owners
    return owners.of(request.scope["headers"])


# -- create ---------------------------------------------------------------------------
@router.post(
    "/create_sandbox",
    response_class=EventStreamResponse,
    status_code=200,
    responses={**SSE, **ERRORS},
)
async def create_sandbox(
    request: Request, body: SandboxRequest, settings: SettingsDep
) -> EventStreamResponse:
    """SSE: `task_id` (the sandbox id) at once, then `end` with `{"sid": ...}` once the
    container runs, or `error`. Re-posting with the `task_id` resumes the wait."""
    manager, client = manager_of(request), owner(request)
    if body.task_id is not None:
        box = manager.get(client, body.task_id)
    else:
        box = _create(manager, client, body, settings)
    first = [{"event": "task_id", "data": box.id}]
    started = lambda: _started(manager, box)  # noqa: E731
    return EventStreamResponse(first, started, settings.keepalive_s, manager.clock)


def _create(
    manager: SandboxManager, client: str, body: SandboxRequest, settings: Settings
) -> ApiSandbox:
    body.check_supported()
    image = manager.images.rewrite(body.image)  # once: the name judged is the one started
    check_sandbox_image(body.image, image, settings)
    check_sandbox_network(body.network_setting()[0], settings)
    check_backend_network(body.network_setting()[0], manager.backend.capabilities)
    sid = manager.new_id()
    labels = {
        "orsbox.sandbox_api": "1",
        "orsbox.client": client,
        "orsbox.environment": f"sandbox:{body.environment or '-'}"[:100],  # for `orsbox ps`
    }
    spec = body.spec(image, sid, labels)
    return manager.create(
        client,
        spec,
        has_network_policy=body.network is not None,
        image=image_mapping(body.image, image),
    )


async def _started(manager: SandboxManager, box: ApiSandbox) -> list[Event]:
    await box.ready.wait()
    if box.error is not None:  # gone at once: a failed start holds no slot of the cap
        await manager.delete(box.id, why=box.error)
        return [{"event": "error", "data": box.error}]
    return [{"event": "end", "data": json.dumps({"sid": box.id})}]


# -- run ------------------------------------------------------------------------------
@router.post(
    "/run", response_class=EventStreamResponse, status_code=200, responses={**SSE, **ERRORS}
)
async def run(
    request: Request, body: RunRequest, sid: SessionIdDep, calls: CallsDep, settings: SettingsDep
) -> EventStreamResponse:
    """SSE like a tool call: `task_id`, then `{"output": base64, "return_code",
    "timed_out"}`. Re-posting with the `task_id` reconnects to the running command."""
    manager = manager_of(request)
    run = None
    if body.task_id is not None:
        manager.get(owner(request), sid)  # only its owner may reconnect
    else:
        box, _ = await manager.running(owner(request), sid)
        run = lambda: _run_command(manager, box, body, settings)  # noqa: E731
    return detached_stream(calls, sid, body.task_id, run, settings.keepalive_s, manager.clock)


async def _run_command(
    manager: SandboxManager, box: ApiSandbox, body: RunRequest, settings: Settings
) -> list[Event]:
    """The command's answer, counted in the metrics like a session's tool call."""
    limit = settings.sandbox_max_output_bytes
    max_bytes = limit if body.max_bytes is None else min(body.max_bytes, limit)
    timeout = settings.sandbox_max_run_timeout_s
    if body.timeout_s is not None and body.timeout_s > 0:
        timeout = min(body.timeout_s, timeout)
    box.in_flight += 1
    try:
        sandbox = box.sandbox
        if sandbox is None:
            return [{"event": "error", "data": "the sandbox is gone"}]
        # Twice the cap: the first half of what the sandbox keeps is the output's head.
        argv, stdin = body.command()
        with manager.observer.sandbox_run():
            result = await sandbox.exec(
                argv,
                timeout_s=timeout,
                output_cap_bytes=2 * max_bytes + 2,
                stdin=stdin,
                cwd=body.cwd,
                env=body.env,
                user=body.user,
            )
    except SandboxError as e:
        return [{"event": "error", "data": f"the command could not run: {e}"}]
    finally:
        box.in_flight -= 1
        box.touch()
    code = TIMED_OUT_EXIT if result.timed_out else result.exit_code
    answer = {
        "output": base64.b64encode(result.data[:max_bytes]).decode("ascii"),
        "return_code": -1 if code is None else code,
        "timed_out": result.timed_out,
    }
    return result_events(json.dumps(answer))


# -- files ----------------------------------------------------------------------------
@router.post("/stat_file", responses=ERRORS)
async def stat_file(
    request: Request, sid: SessionIdDep, path: str, sha256: str | None = None
) -> dict[str, object]:
    _, sandbox = await manager_of(request).running(owner(request), sid)
    return await files.stat_file(sandbox, path, truthy(sha256))


@router.post("/read_file", responses={**ERRORS, **errors(416)})
async def read_file(
    request: Request,
    sid: SessionIdDep,
    path: str,
    offset: Annotated[int, Query(ge=0)] = 0,
    length: Annotated[int, Query(ge=0, le=64 * 1024 * 1024)] = 4 * 1024 * 1024,
) -> Response:
    """Raw bytes; `X-File-Size` is the whole file's size when read."""
    _, sandbox = await manager_of(request).running(owner(request), sid)
    size, data = await files.read_chunk(sandbox, path, offset, length)
    headers = {"X-File-Size": str(size)}
    return Response(data, media_type="application/octet-stream", headers=headers)


@router.post("/write_file", responses=ERRORS)
async def write_file(
    request: Request,
    sid: SessionIdDep,
    path: str,
    offset: Annotated[int, Query(ge=0)] = 0,
    mkdirs: str | None = None,
    commit: str | None = None,
    size: Annotated[int | None, Query(ge=0)] = None,
) -> dict[str, object]:
    """A chunk at `offset` (the body, raw), or with `commit=1` and `size` the end of the
    transfer: `{"sha256": ...}` of what was committed."""
    _, sandbox = await manager_of(request).running(owner(request), sid)
    if truthy(commit):
        if size is None:
            raise BadRequest("size: a commit must name the file's size")
        return {"sha256": await files.commit(sandbox, path, size)}
    await files.write_chunk(sandbox, path, offset, await request.body(), truthy(mkdirs))
    return {"ok": True}


# -- network --------------------------------------------------------------------------
@router.post("/set_network", responses=ERRORS)
async def set_network(
    request: Request,
    sid: SessionIdDep,
    settings: SettingsDep,
    policy: Annotated[NetworkPolicy, Body()],
) -> dict[str, str]:
    """The policy's hosts through an egress proxy (see `request.NetworkPolicy`);
    returns once in force."""
    box, sandbox = await manager_of(request).running(owner(request), sid)
    if not box.has_network_policy:
        raise BadRequest("this sandbox was created without network=; it cannot be given one")
    network, hosts = policy.setting()
    check_sandbox_network(network, settings)
    check_backend_network(network, manager_of(request).backend.capabilities, switching=True)
    await sandbox.set_network(network, hosts)
    return {"status": "ok"}


# -- shared with ORS sessions ---------------------------------------------------------
async def ping_sandbox(request: Request, sid: str) -> JSONResponse:
    """200 while starting or running; 410 once it died, so the client learns it early."""
    manager, client = manager_of(request), owner(request)
    if manager.get(client, sid).ready.is_set():
        await manager.running(client, sid)
    return JSONResponse({"status": "ok"})


async def delete_sandbox(request: Request, sid: str) -> JSONResponse:
    """Idempotent like `/delete`: another client's or an unknown id is left alone."""
    manager = manager_of(request)
    try:
        manager.get(owner(request), sid)
    except Misdirected:
        raise  # another cell's: its sandbox still runs there
    except OrsboxError:
        return JSONResponse({"sid": sid})
    await manager.delete(sid)
    return JSONResponse({"sid": sid})


# What a session's key (and the server's) opens (`orsbox.server.access.TokenMiddleware`):
# these routes, and the two ORS shares for sandbox ids.
SANDBOX_PATHS = frozenset(getattr(route, "path", "") for route in router.routes)
SHARED_PATHS = frozenset({"/ping", "/delete_session"})
