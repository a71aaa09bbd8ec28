"""`create_app`: the ORS server as a FastAPI application.

Phases, as uvicorn names them:
* startup — install log redaction, start the inactivity reaper and the event loop's lag
  monitor (`orsbox.monitoring.loop_lag`) (and, for container environments, the sandbox
  backend's sweep of leftovers from dead servers, and the warm pool's first fill when
  `warm_pool` > 0);
* serve — routes in `orsbox.server.routes`, thin, grouped by catalog/sessions/calls/
  scoring, orsbox's own `/orsbox/*` (`extensions`: fork, warm), and the sandbox API's
  (`sandboxes`) when `sandbox_api` is on;
* shutdown — cancel running calls, tear down every session (each teardown bounded by
  `teardown_timeout_s`), remove the sandbox API's sandboxes, close the sandbox backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import FastAPI
from pydantic import SecretStr

from orsbox import __version__
from orsbox.authoring import Environment
from orsbox.authoring.container import ContainerEnvironment
from orsbox.authoring.setup_inputs import CONTEXT_SETUP_SNAPSHOTS
from orsbox.clock import SYSTEM_CLOCK, Clock
from orsbox.errors import SandboxError
from orsbox.monitoring.loop_lag import watch_loop_lag
from orsbox.monitoring.metered_backend import MeteredBackend
from orsbox.protocol.calls import CallRegistry
from orsbox.sandbox import SandboxBackend, create_backend
from orsbox.sandbox.image_cache import ImageCachingBackend
from orsbox.sandbox.pool import WarmPool
from orsbox.sandbox.setup_snapshots import SetupSnapshots
from orsbox.server.access import OPEN_PATHS, TokenMiddleware
from orsbox.server.catalog import DEFAULT_SETTING, Catalog
from orsbox.server.collector import watch_collector
from orsbox.server.errors import install_error_handlers
from orsbox.server.fast_path import CallFastPath
from orsbox.server.health import HealthProbe
from orsbox.server.middleware import BodyLimitMiddleware, ClientCompatMiddleware
from orsbox.server.observer import Observer
from orsbox.server.openapi import install_openapi
from orsbox.server.owners import Owners
from orsbox.server.policy import check_policy, check_sandbox_api
from orsbox.server.routes import (
    calls,
    catalog,
    extensions,
    sandboxes,
    scoring,
    sessions,
    status,
)
from orsbox.server.routes.sandboxes import SANDBOX_PATHS, SHARED_PATHS
from orsbox.server.sandbox_api import SandboxManager
from orsbox.server.sandbox_api.manager import SANDBOX_ID_PREFIX
from orsbox.server.sandbox_api.session_url import log_client_url, log_session_url
from orsbox.server.secrets import LIVE_SECRETS, install_log_redaction
from orsbox.server.sessions import SessionManager
from orsbox.settings import Settings

log = logging.getLogger("orsbox.server")


def create_app(
    environments: Sequence[type[Environment]],
    settings: Settings | None = None,
    *,
    sandbox_backend: SandboxBackend | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> FastAPI:
    """An ORS server for `environments` (the first is the default). Container
    environments get a Docker backend unless another `sandbox_backend` is given.
    `clock`: what the sessions' and sandboxes' timeouts, the reapers and the warm pool
    read the time from (`orsbox.clock`; tests move a `ManualClock`)."""
    settings = settings or Settings()
    cat = Catalog(environments, default=settings.default_environment)
    if sandbox_backend is None:
        sandbox_backend = _default_backend(environments, settings, clock)
    check_policy(environments, settings, sandbox_backend)
    check_sandbox_api(settings)
    observer = Observer.from_settings(settings)
    owners = Owners.from_settings(settings)  # who each request is (its token)
    # Every sandbox the server starts, a session's or the sandbox API's, goes through
    # this one metered backend, so the start metrics count them all.
    cached = _with_image_cache(sandbox_backend, settings)
    metered = MeteredBackend(cached, observer.metrics) if cached is not None else None
    manager = SessionManager(
        settings,
        _context_extras(sandbox_backend, settings),
        observer=observer,
        clock=clock,
        owners=owners,
    )
    manager.sandbox_backend = metered
    manager.catalog = cat  # binds sessions whose /create named no environment
    registry = CallRegistry(linger_s=settings.result_linger_s, clock=clock)
    sandbox_api = None
    if settings.sandbox_api and metered is not None:
        sandbox_api = SandboxManager(settings, metered, observer, clock=clock)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        install_log_redaction()
        observer.start()
        if sandbox_backend is not None:
            await _sweep(sandbox_backend)
            if settings.allow_network:  # the egress guard is in place before any session
                await _prepare_network(sandbox_backend)
            _prewarm(sandbox_backend, environments)
        background = [
            asyncio.create_task(manager.reap_forever()),
            asyncio.create_task(watch_loop_lag(observer.metrics.loop_lag_seconds)),
        ]
        if sandbox_api is not None:
            background.append(asyncio.create_task(sandbox_api.reap_forever()))
        log.info(
            "serving %s (default, for requests naming no environment by path, env_name or "
            "X-Deployment: %s)",
            ", ".join(cat.names),
            cat.default or f"none, such a request is a 400; {DEFAULT_SETTING} sets one",
        )
        log_client_url(settings)
        log_session_url(settings)
        try:
            with watch_collector(observer.metrics.collector_pause_seconds):
                yield
        finally:
            for task in background:
                task.cancel()
            await registry.cancel_all()
            await manager.close_all()
            if sandbox_api is not None:
                await sandbox_api.close_all()
            if sandbox_backend is not None:
                await sandbox_backend.close()
            observer.close()

    app = FastAPI(title="orsbox", version=__version__, lifespan=lifespan)
    app.state.settings = settings
    app.state.catalog = cat
    app.state.sessions = manager
    app.state.owners = owners
    app.state.calls = registry
    app.state.sandbox_api = sandbox_api
    app.state.health = HealthProbe(sandbox_backend, clock)
    app.state.warm_pool = sandbox_backend if isinstance(sandbox_backend, WarmPool) else None
    app.state.observer = observer
    app.state.image_cache = cached.cache if isinstance(cached, ImageCachingBackend) else None
    observer.metrics.watch(lambda: status.server_state(app))
    if app.state.image_cache is not None:
        observer.metrics.watch_images(lambda: app.state.image_cache.stats)
    install_error_handlers(app)
    for module in (catalog, sessions, calls, scoring, status, extensions):
        app.include_router(module.router)
    if sandbox_api is not None:
        app.include_router(sandboxes.router)
    tokens = [t.get_secret_value() for t in (settings.token, *settings.sandbox_tokens) if t]
    install_openapi(app, cat.names, token_required=bool(tokens))
    app.add_middleware(
        CallFastPath,
        catalog=cat,
        sessions=manager,
        calls=registry,
        settings=settings,
        owners=owners,
    )  # innermost: every other middleware runs first
    app.add_middleware(ClientCompatMiddleware, catalog=cat)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    if tokens:  # outermost: nothing runs for a request without one
        LIVE_SECRETS.add({f"token{i}": SecretStr(t) for i, t in enumerate(tokens)})  # ?token=
        open_paths = OPEN_PATHS | ({"/metrics"} if settings.metrics_public else set())
        app.add_middleware(
            TokenMiddleware,
            token=tokens[0],
            more=tuple(tokens[1:]),
            open_paths=open_paths,
            owners=owners,  # the keys environments' openreward clients present
            key_paths=SANDBOX_PATHS if sandbox_api is not None else frozenset(),
            shared_paths=SHARED_PATHS if sandbox_api is not None else frozenset(),
            key_prefix=SANDBOX_ID_PREFIX.encode(),
        )
    return app


async def _prepare_network(backend: SandboxBackend) -> None:
    """Put the egress guard in place; a host where it cannot be (no root, no iptables)
    still serves, and refuses each sandbox that asks for a network, saying why."""
    try:
        await backend.prepare_network()
    except SandboxError as e:
        log.error("the egress guard is not in place, networked sandboxes are refused: %s", e)


def _default_backend(
    environments: Sequence[type[Environment]], settings: Settings, clock: Clock
) -> SandboxBackend | None:
    """Docker for container environments and the sandbox API, behind a warm pool when
    one is configured."""
    needs = settings.sandbox_api or any(issubclass(e, ContainerEnvironment) for e in environments)
    if not needs:
        return None
    backend = create_backend(
        settings.backend,
        server_id=settings.server_id,
        start_concurrency=settings.sandbox_start_concurrency,
    )
    return WarmPool(  # with warm_pool = 0, it holds only what `POST /orsbox/warm` asks for
        backend,
        settings.warm_pool,
        idle_ttl_s=settings.warm_pool_idle_ttl_s,
        memory_budget=settings.warm_pool_memory_bytes,
        clock=clock,
    )


def _with_image_cache(backend: SandboxBackend | None, settings: Settings) -> SandboxBackend | None:
    """`backend` with its pulls shared and its pulled images within the disk budget
    (`orsbox.sandbox.image_cache`); as it is when it keeps no images (a test double)."""
    if backend is None:
        return None
    try:
        backend.images  # noqa: B018  # raises for a backend that keeps none
    except (SandboxError, AttributeError):
        return backend
    return ImageCachingBackend(backend, budget_bytes=settings.image_disk_budget)


def _context_extras(backend: SandboxBackend | None, settings: Settings) -> dict[str, Any]:
    """What every environment instance is handed: the setup snapshots, when the
    backend can save sandboxes."""
    store = getattr(backend, "snapshots", None)  # a test double may not have one
    if store is None:
        return {}
    cache = SetupSnapshots(
        store,
        max_entries=settings.setup_snapshots_max_entries,
        max_bytes=settings.setup_snapshots_max_bytes,
    )
    return {CONTEXT_SETUP_SNAPSHOTS: cache}


def _prewarm(backend: SandboxBackend, environments: Sequence[type[Environment]]) -> None:
    """Fill the warm pool for the served environments in the background."""
    if isinstance(backend, WarmPool):
        specs = [e.prewarm_spec() for e in environments if issubclass(e, ContainerEnvironment)]
        backend.prewarm([spec for spec in specs if spec is not None])


async def _sweep(backend: SandboxBackend) -> None:
    """Remove sandboxes that servers which died without cleaning up left behind."""
    try:
        removed = await backend.sweep()
    except Exception as e:  # a sweep failure must not stop the server from starting
        log.warning("could not sweep leftover sandboxes: %s", e)
        return
    if removed:
        log.info("removed %d sandbox(es) left by dead servers", removed)
