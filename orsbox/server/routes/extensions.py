"""orsbox's own endpoints, beyond ORS: under `/orsbox/`, so no ORS path is taken and
clients that do not know them never call them.

* `POST /orsbox/fork` (`X-Session-ID`, `{"n": N}`): N new sessions from the session's
  current files (`orsbox.server.forks`); answers `{"sids": [...]}`.
* `POST /orsbox/warm` (`{"env_name", "count"}`, optionally `split` and `index` or
  `task_spec` for an environment whose image is per task): start `count` idle sandboxes
  of the environment's sandbox spec ahead of a burst (`orsbox.sandbox.pool`), within
  `warm_pool_memory_bytes`; answers how many will be kept ready.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from orsbox.errors import BadRequest
from orsbox.server import forks
from orsbox.server.deps import CatalogDep, OwnerDep, SessionIdDep, SessionsDep
from orsbox.server.openapi import errors
from orsbox.server.warming import warm_spec

router = APIRouter(prefix="/orsbox", tags=["orsbox extensions"])


class ForkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = Field(description="how many sessions to start from the session's files")


class ForkAnswer(BaseModel):
    sids: list[str]


class WarmRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_name: str
    count: int = Field(ge=0, description="idle sandboxes to keep ready for this environment")
    split: str | None = None
    index: int | None = None
    task_spec: dict[str, Any] | None = None


class WarmAnswer(BaseModel):
    image: str
    target: int = Field(description="idle sandboxes the pool will keep (memory budget allowing)")
    idle: int = Field(description="idle sandboxes ready now")


@router.post("/fork", responses=errors(400, 404, 410, 500, 503))
async def fork(
    sid: SessionIdDep, sessions: SessionsDep, owner: OwnerDep, body: ForkRequest
) -> ForkAnswer:
    """Start `n` new sessions from this session's current files (orsbox's extension),
    the asking client's, as the source is."""
    return ForkAnswer(sids=await forks.fork(sessions, sid, body.n, owner=owner))


@router.post("/warm", responses=errors(400, 404, 500))
async def warm(request: Request, catalog: CatalogDep, body: WarmRequest) -> WarmAnswer:
    """Keep `count` idle sandboxes of the environment's (or task's) spec ready."""
    pool = request.app.state.warm_pool
    if pool is None:
        raise BadRequest("this server has no sandbox backend to warm")
    _, env_cls = catalog.get(body.env_name)
    task = body.task_spec
    if task is None and body.split is not None:
        task = await catalog.task(env_cls, body.split, body.index or 0)
    spec = await warm_spec(env_cls, task, request.app.state.sessions.context_extras)
    target = pool.fill(spec, body.count)
    return WarmAnswer(image=spec.image, target=target, idle=pool.idle_count(spec))
