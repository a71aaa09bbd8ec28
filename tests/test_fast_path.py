"""The call fast path answers every `/call` request exactly as the FastAPI route does.

Two apps over the same environments, one without the fast path; the same requests
(happy, malformed, unknown, deleted, failed, still starting, reconnecting, oversize)
must get the same status, headers and body, task ids aside."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from orsbox.server import create_app
from orsbox.server.fast_path import CallFastPath
from orsbox.settings import Settings
from tests.fixture_envs.protocol_envs import Protocol, Second
from tests.waiting import wait_until_async

pytestmark = pytest.mark.anyio

# No setup wait: a request for a session in setup is answered 503 at once by both paths
# (the wait itself, on a manual clock: tests/test_server_timeouts.py).
# The operator's default environment: the bare `/call` below reaches it.
SETTINGS = Settings(
    setup_wait_s=0, max_body_bytes=10_000, log_level="warning", default_environment="protocol"
)
TASK_ID = re.compile(rb"[0-9a-f]{32}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_app(fast: bool) -> FastAPI:
    app = create_app([Protocol, Second], SETTINGS)
    if not fast:
        app.user_middleware = [m for m in app.user_middleware if m.cls is not CallFastPath]
    return app


@pytest.fixture
async def clients() -> AsyncIterator[list[httpx.AsyncClient]]:
    apps = [make_app(fast=True), make_app(fast=False)]
    async with (
        apps[0].router.lifespan_context(apps[0]),
        apps[1].router.lifespan_context(apps[1]),
    ):
        yield [
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
            for app in apps
        ]


async def both(clients: list[httpx.AsyncClient], method: str, path: str, **kw: Any) -> Any:
    """The same request to both apps; assert equal answers and return the fast one's."""
    fast, route = [await c.request(method, path, **kw) for c in clients]
    assert fast.status_code == route.status_code, (path, kw, fast.text, route.text)
    assert dict(fast.headers) == dict(route.headers), (path, kw)
    assert TASK_ID.sub(b"T", fast.content) == TASK_ID.sub(b"T", route.content), (path, kw)
    return fast


async def create(clients: list[httpx.AsyncClient], sid: str, **task: Any) -> None:
    body = {"env_name": "protocol", "task_spec": {"answer": "4", **task}}
    await both(clients, "POST", "/create", json=body, headers={"X-Session-ID": sid})


async def settled(clients: list[httpx.AsyncClient], *sids: str) -> None:
    """Wait until each session's setup has ended (ready or failed) in both apps."""

    def done() -> bool:
        managers = [client._transport.app.state.sessions for client in clients]  # type: ignore[attr-defined]
        return all(m.get(sid, owner=None).ready.is_set() for m in managers for sid in sids)

    await wait_until_async(done, 5, message=f"setup of {sids} ended")


def call(sid: str | None, body: Any, **headers: str) -> dict[str, Any]:
    if sid is not None:
        headers["X-Session-ID"] = sid
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return {"content": raw, "headers": {"Content-Type": "application/json", **headers}}


async def test_every_kind_of_call_is_answered_alike(
    clients: list[httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = []
    start = CallFastPath._start
    monkeypatch.setattr(
        CallFastPath, "_start", lambda self, *a: taken.append(start(self, *a)) or taken[-1]
    )
    await create(clients, "s1")
    await settled(clients, "s1")
    echo = {"name": "echo", "input": {"text": "hi"}}
    cases = [
        ("/protocol/call", call("s1", echo)),
        ("/call", call("s1", echo)),  # bare path: the default environment
        ("/Protocol/call", call("s1", echo)),
        ("/second_env/call", call("s1", echo)),  # not the session's: 400 naming both
        ("/second/call", call("s1", echo)),
        ("/protocol/call", call("s1", {"name": "submit", "input": {"answer": "4"}})),
        ("/protocol/call", call("s1", {"name": "nope"})),
        ("/protocol/call", call("s1", {"name": "echo", "input": {"text": 3}})),
        ("/protocol/call", call("s1", {"name": "explode"})),
        ("/protocol/call", call("s1", {"name": "leak"})),
        ("/protocol/call", call("s1", echo, **{"Content-Type": "application/json; charset=utf-8"})),
        (
            "/protocol/call",
            call("s1", echo, **{"Content-Type": "application/x-www-form-urlencoded"}),
        ),
        ("/protocol/call", call("s1", echo, **{"Content-Type": "text/plain"})),
        ("/protocol/call", call("s1", echo, **{"X-Session-ID": "  s1 "})),
        ("/nope/call", call("s1", echo)),
        ("/protocol/call", call(None, echo)),
        ("/protocol/call", call("", echo)),
        ("/protocol/call", call("unknown", echo)),
        ("/protocol/call", call("s1", b"{not json")),
        ("/protocol/call", call("s1", b"")),
        ("/protocol/call", call("s1", b"[1, 2]")),
        ("/protocol/call", call("s1", b"[" * 100_000)),
        ("/protocol/call", call("s1", {"input": {}})),
        ("/protocol/call", call("s1", {"name": "echo", "input": {"text": "x" * 20_000}})),
        ("/protocol/call", call("s1", {"name": "echo", "task_id": "0" * 32})),
        ("/protocol/call/", call("s1", echo)),
    ]
    for path, kw in cases:
        await both(clients, "POST", path, **kw)
    assert sum(record is not None for record in taken) == 11  # the rest went to the route


async def test_sessions_starting_failed_deleted_and_reconnects_alike(
    clients: list[httpx.AsyncClient],
) -> None:
    echo = {"name": "echo", "input": {"text": "hi"}}
    await create(clients, "slow", setup_s=5)
    await create(clients, "failed", fail_setup=True)
    await create(clients, "gone")
    await settled(clients, "failed", "gone")
    await both(clients, "POST", "/delete", headers={"X-Session-ID": "gone"})
    for sid in ("slow", "failed", "gone"):
        await both(clients, "POST", "/protocol/call", **call(sid, echo))

    # a reconnect replays the finished call of the same session, in each app
    await create(clients, "s2")
    await settled(clients, "s2")
    first = [await c.post("/protocol/call", **call("s2", echo)) for c in clients]
    task_ids = [TASK_ID.search(r.content).group().decode() for r in first]
    again = [
        await c.post("/protocol/call", **call("s2", {**echo, "task_id": task_id}))
        for c, task_id in zip(clients, task_ids, strict=True)
    ]
    assert again[0].content == first[0].content and again[1].content == first[1].content
