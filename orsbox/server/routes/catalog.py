"""Discovery: what environments, tools, splits and tasks exist. No session needed; an
`X-Session-ID` header (the ors-sdk client always sends a throwaway one) is ignored."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from orsbox import __version__
from orsbox.protocol.types import (
    GetTask,
    GetTaskRange,
    ListTasks,
    ListToolsOutput,
    NumTasks,
    NumTasksAnswer,
    Split,
    TaskAnswer,
    TasksAnswer,
)
from orsbox.server.deps import CatalogDep
from orsbox.server.openapi import errors

router = APIRouter()


@router.get("/health", responses=errors(400, 503))
async def health(request: Request, room: bool = False) -> Any:
    """200 while the server runs; `degraded` (still 200) when sandboxes cannot start.
    Also this cell's id and load (live sessions, starting, capacity): what a router or
    an operator weighs a cell by (docs/cluster.md). With `room=1`, 503 (same body) while
    the cell is full: the router's image placement checks this, so a full cell leaves
    the hash ring until it has room instead of refusing each session in turn."""
    state = request.app.state
    report: dict[str, Any] = await state.health.report()
    report["cell"] = state.settings.cell
    report.update(state.sessions.load())
    if state.sandbox_api is not None:
        report["sandboxes"] = len(state.sandbox_api)
    if room and not state.sessions.has_room():
        return JSONResponse(report, status_code=503)
    return report


@router.get("/version")
async def version() -> dict[str, str | None]:
    return {"version": __version__, "build_sha": None}


@router.get("/list_environments")
async def list_environments(catalog: CatalogDep) -> list[str]:
    return catalog.names


@router.get("/{env_name}/tools", responses=errors(404))
async def tools(env_name: str, catalog: CatalogDep) -> ListToolsOutput:
    _, env_cls = catalog.get(env_name)
    return env_cls.list_tools()


@router.get("/{env_name}/splits", responses=errors(404))
async def splits(env_name: str, catalog: CatalogDep) -> list[Split]:
    _, env_cls = catalog.get(env_name)
    return await catalog.splits(env_cls)


@router.post("/{env_name}/tasks", responses=errors(400, 404, 413))
async def tasks(env_name: str, body: ListTasks, catalog: CatalogDep) -> TasksAnswer:
    name, env_cls = catalog.get(env_name)
    return TasksAnswer(tasks=await catalog.tasks(env_cls, body.split), env_name=name)


@router.post("/{env_name}/num_tasks", responses=errors(400, 404, 413))
async def num_tasks(env_name: str, body: NumTasks, catalog: CatalogDep) -> NumTasksAnswer:
    _, env_cls = catalog.get(env_name)
    return NumTasksAnswer(num_tasks=await catalog.num_tasks(env_cls, body.split))


@router.post("/{env_name}/task", responses=errors(400, 404, 413))
async def task(env_name: str, body: GetTask, catalog: CatalogDep) -> TaskAnswer:
    name, env_cls = catalog.get(env_name)
    return TaskAnswer(task=await catalog.task(env_cls, body.split, body.index), env_name=name)


@router.post("/{env_name}/task_range", responses=errors(400, 404, 413))
async def task_range(env_name: str, body: GetTaskRange, catalog: CatalogDep) -> TasksAnswer:
    name, env_cls = catalog.get(env_name)
    found = await catalog.task_range(env_cls, body.split, body.start, body.stop)
    return TasksAnswer(tasks=found, env_name=name)
