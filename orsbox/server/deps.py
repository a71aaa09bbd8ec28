"""Request-scoped lookups shared by the routes: the app's services and the session id.

All are `async def` on purpose: FastAPI runs a plain `def` dependency in a worker
thread, which cost a thread hop per dependency on every tool call."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from orsbox.errors import BadRequest
from orsbox.protocol.calls import CallRegistry
from orsbox.server.catalog import Catalog
from orsbox.server.owners import Owners
from orsbox.server.sessions import SessionManager
from orsbox.settings import Settings


async def get_catalog(request: Request) -> Catalog:
    return request.app.state.catalog


async def get_sessions(request: Request) -> SessionManager:
    return request.app.state.sessions


async def get_calls(request: Request) -> CallRegistry:
    return request.app.state.calls


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_owner(request: Request) -> str:
    """The client that sent the request (`orsbox.server.owners`): it sees and ends only
    its own sessions and sandboxes."""
    owners: Owners = request.app.state.owners
    return owners.of(request.scope["headers"])


async def session_id(x_session_id: Annotated[str | None, Header()] = None) -> str:
    sid = (x_session_id or "").strip()
    if not sid:
        raise BadRequest("X-Session-ID header is required")
    return sid


CatalogDep = Annotated[Catalog, Depends(get_catalog)]
SessionsDep = Annotated[SessionManager, Depends(get_sessions)]
CallsDep = Annotated[CallRegistry, Depends(get_calls)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionIdDep = Annotated[str, Depends(session_id)]
OwnerDep = Annotated[str, Depends(get_owner)]
