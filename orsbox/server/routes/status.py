"""The operator's endpoints: `GET /metrics` (Prometheus) and the status page (`/`,
`/ui/live`, `/ui/episodes/{id}`). The token applies to both (see `orsbox.server.access`
for how a browser presents it); `ORSBOX_METRICS_PUBLIC` opens `/metrics` to a scraper."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
from collections import Counter
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from orsbox.errors import NotFound
from orsbox.monitoring import episodes as E
from orsbox.monitoring.metrics import CONTENT_TYPE, State
from orsbox.sandbox.pool import WarmPool
from orsbox.server import status_page
from orsbox.server.sessions import Session

router = APIRouter(include_in_schema=False)
RECENT = 30


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    await request.app.state.health.report()  # cached briefly; fresh enough for a scrape
    body = request.app.state.observer.metrics.render()
    return Response(body, media_type=CONTENT_TYPE)


def server_state(app: Any) -> State:
    """The state the metrics report at each scrape."""
    state = app.state
    pool = _warm_pool(state.sessions.sandbox_backend)
    live = state.sessions.live()
    now = state.sessions.clock.monotonic()
    idle: dict[str, list[float]] = {}
    for session in live:
        age = session.idle_for(now)
        if age is not None:
            idle.setdefault(session.env_name, []).append(age)
    return State(
        sessions=Counter((s.env_name, s.state) for s in live),
        idle=idle,
        warm_idle=None if pool is None else pool.idle_count(),
        warm_hits=0 if pool is None else pool.hits,
        warm_misses=0 if pool is None else pool.misses,
        engine_up=state.health.last_ok,
        records_dropped=0 if state.observer.recorder is None else state.observer.recorder.dropped,
    )


def _warm_pool(backend: Any) -> WarmPool | None:
    while backend is not None and not isinstance(backend, WarmPool):
        backend = getattr(backend, "backend", None)  # what a wrapper wraps
    return backend


@router.get("/", response_class=HTMLResponse)
async def status(request: Request) -> HTMLResponse:
    live = status_page.live_sessions(await _live_sessions(request))
    episodes = await _read(request, lambda conn: E.recent(conn, RECENT))
    cache = request.app.state.image_cache
    body = status_page.status(
        live, episodes, request.app.state.catalog.names, cache.stats if cache else None
    )
    return _html("orsbox status", body, script=True)


@router.get("/ui/live", response_class=HTMLResponse)
async def live(request: Request) -> HTMLResponse:
    return HTMLResponse(status_page.live_sessions(await _live_sessions(request)), headers=_NO_STORE)


@router.get("/ui/episodes/{episode_id}", response_class=HTMLResponse)
async def episode(request: Request, episode_id: str) -> HTMLResponse:
    found = await _read(request, lambda conn: E.find(conn, episode_id))
    if not found:
        raise NotFound(f"no recorded episode {episode_id!r}")
    return _html(f"episode {episode_id[:12]}", status_page.transcript(found), script=False)


async def _live_sessions(request: Request) -> list[dict[str, Any]]:
    manager = request.app.state.sessions
    sessions = manager.live()
    usages = await asyncio.gather(*(s.observer.usage(s) for s in sessions))
    now = manager.clock.monotonic()
    return [_describe(s, usage, now) for s, usage in zip(sessions, usages, strict=True)]


def _describe(session: Session, usage: dict[str, Any], now: float) -> dict[str, Any]:
    name = getattr(session.env, "sandbox_name", None)
    return {
        "sid": session.sid,
        "environment": session.env_name,
        "task": session.stats.task,
        "state": session.state,
        "idle_s": session.idle_for(now),  # None while busy or not ready
        "last_ping_s": None if session.last_ping is None else now - session.last_ping,
        "usage": usage,
        "container": name() if name is not None else None,
    }


async def _read(request: Request, query: Any) -> Any:
    """`query(connection)` on the episode database in a worker thread; None when
    recording is off or the database cannot be read."""
    recorder = request.app.state.observer.recorder
    if recorder is None:
        return None

    def read() -> Any:
        with contextlib.closing(E.connect(recorder.path)) as conn:
            return query(conn)

    try:
        return await anyio.to_thread.run_sync(read)
    except sqlite3.Error:
        return None


_NO_STORE = {"cache-control": "no-store"}


def _html(title: str, body: str, *, script: bool) -> HTMLResponse:
    nonce = secrets.token_urlsafe(16) if script else None
    headers = {**_NO_STORE, "content-security-policy": status_page.csp(nonce)}
    return HTMLResponse(status_page.page(title, body, nonce), headers=headers)
