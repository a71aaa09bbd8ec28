"""The server's timeouts, through the app, on a manual clock:
* the reaper: an idle session is torn down after the inactivity timeout and not
  before (counted and recorded as reaped), while a session with a call running or
  still in setup is never reaped;
* the setup wait: a request for a session in setup waits for it `setup_wait_s` at most,
  then gets 503 with Retry-After, and is answered as soon as the setup ends;
* the SSE keep-alive: a `: ping` comment every `keepalive_s` while a call runs;
* the reconnect buffer: a finished call's result is there for `result_linger_s`.
The app is the one `create_app` builds, lifespan and reaper included, at the default
settings; only its clock is moved by hand (`orsbox.clock.ManualClock`), so no test
waits a timeout out. The lease's rules alone: tests/test_session_lease.py; real clients
and processes: tests/test_abandoned_sessions.py; the keep-alive at its default interval
on a live server: test_http_protocol's `full_matrix` test."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from orsbox import Environment, TextBlock, ToolOutput, tool
from orsbox.clock import ManualClock
from orsbox.server import create_app
from orsbox.server.sessions import SessionManager
from orsbox.settings import Settings

pytestmark = pytest.mark.anyio

SETTINGS = Settings(log_level="warning")  # the defaults: a 900 s timeout, a look every 5 s
TIMEOUT_S, REAP_S = SETTINGS.session_timeout_s, SETTINGS.reap_interval_s
SETUP_WAIT_S, KEEPALIVE_S = SETTINGS.setup_wait_s, SETTINGS.keepalive_s
LINGER_S = SETTINGS.result_linger_s


class Gated(Environment):
    """A setup and a tool that wait until the test opens their gate; a teardown that
    says it ran."""

    setup_gate: asyncio.Event | None = None
    call_gate: asyncio.Event | None = None
    in_call: asyncio.Event | None = None
    torn_down: list[str] = []

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{}]

    async def setup(self):
        if self.task_spec.get("gated_setup"):
            assert Gated.setup_gate is not None
            await Gated.setup_gate.wait()

    def teardown(self):
        Gated.torn_down.append(self.task_spec["name"])

    def get_prompt(self):
        return [TextBlock(text="wait")]

    @tool
    async def wait(self) -> ToolOutput:
        """Run until the test says so."""
        assert Gated.call_gate is not None and Gated.in_call is not None
        Gated.in_call.set()
        await Gated.call_gate.wait()
        return ToolOutput(blocks=[TextBlock(text="done")])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def served(settings: Settings) -> AsyncIterator[FastAPI]:
    """The app, started, on a manual clock; closed on exit (its records written)."""
    Gated.setup_gate, Gated.call_gate, Gated.in_call = (asyncio.Event() for _ in range(3))
    Gated.torn_down = []
    app = create_app([Gated], settings, clock=ManualClock())
    async with app.router.lifespan_context(app):
        await app.state.sessions.clock.sleepers(1)  # the reaper waits for its first look
        yield app


@contextlib.asynccontextmanager
async def client_of(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://orsbox") as client:
        yield client


@pytest.fixture
async def app() -> AsyncIterator[FastAPI]:
    async with served(SETTINGS) as app:
        yield app


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(app) as client:
        yield client


def sessions(app: FastAPI) -> SessionManager:
    return app.state.sessions


async def advance(app: FastAPI, seconds: float) -> None:
    """Move the server's clock; returns once the reaper has looked (if it was due)."""
    await sessions(app).clock.advance(seconds)  # type: ignore[attr-defined]


async def create(client: httpx.AsyncClient, name: str, **task: object) -> str:
    sid = uuid.uuid4().hex
    body = {"task_spec": {"name": name, **task}}
    r = await client.post("/create", headers={"X-Session-ID": sid}, json=body)
    assert r.status_code == 200, r.text
    return sid


async def prompt(client: httpx.AsyncClient, sid: str) -> int:
    return (await client.get("/gated/prompt", headers={"X-Session-ID": sid})).status_code


async def test_an_idle_session_is_torn_down_after_the_timeout_and_a_pinged_one_kept(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    idle, kept = await create(client, "idle"), await create(client, "kept")
    assert await prompt(client, idle) == await prompt(client, kept) == 200
    await advance(app, TIMEOUT_S)
    assert Gated.torn_down == []  # a timeout is not over at its last second
    assert (await client.post("/ping", headers={"X-Session-ID": kept})).status_code == 200
    await advance(app, REAP_S)  # the reaper's next look
    assert Gated.torn_down == ["idle"]
    assert await prompt(client, idle) == 404  # reaped, as the spec says: not 410
    assert await prompt(client, kept) == 200


async def test_a_reaped_session_is_counted_and_recorded_as_reaped(tmp_path: Path) -> None:
    db = tmp_path / "episodes.sqlite3"
    settings = Settings(log_level="warning", episodes_db=str(db))
    async with served(settings) as app, client_of(app) as client:
        sid = await create(client, "idle")
        assert await prompt(client, sid) == 200
        await advance(app, TIMEOUT_S + REAP_S)
        metrics = (await client.get("/metrics")).text.splitlines()
    reaped = 'orsbox_sessions_reaped_total{environment="gated",reason="inactivity"} 1.0'
    assert reaped in metrics  # it never pinged: no lease, the inactivity timeout
    with contextlib.closing(sqlite3.connect(db)) as conn:  # written at the server's close
        rows = conn.execute("SELECT state FROM episodes WHERE session_id = ?", (sid,))
        assert rows.fetchall() == [("reaped",)]


async def start_waiting_call(client: httpx.AsyncClient, sid: str) -> asyncio.Task[httpx.Response]:
    """Session `sid`'s prompt read, then its `wait` call posted and seen running
    inside the tool (it holds until `Gated.call_gate` is set)."""
    assert await prompt(client, sid) == 200
    body = {"name": "wait", "input": {}}
    running = asyncio.create_task(
        client.post("/gated/call", headers={"X-Session-ID": sid}, json=body)
    )
    assert Gated.in_call is not None and Gated.call_gate is not None
    await Gated.in_call.wait()
    return running


async def test_a_running_call_keeps_its_session_alive(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    sid = await create(client, "busy")
    running = await start_waiting_call(client, sid)
    await advance(app, TIMEOUT_S * 2)  # the call outlasts the timeout twice over
    assert Gated.torn_down == [] and [s.sid for s in sessions(app).live()] == [sid]
    Gated.call_gate.set()
    answer = await running
    assert answer.status_code == 200 and "event: end" in answer.text, answer.text
    await advance(app, TIMEOUT_S)  # the clock starts again when the call ends
    assert Gated.torn_down == []
    assert await prompt(client, sid) == 200


async def test_a_session_in_setup_is_not_reaped(app: FastAPI, client: httpx.AsyncClient) -> None:
    """A setup longer than the inactivity timeout must not have its session reaped from
    under the requests waiting for it; the clock starts when it ends."""
    sid = await create(client, "slow", gated_setup=True)
    await advance(app, TIMEOUT_S * 2)
    assert Gated.torn_down == [] and [s.sid for s in sessions(app).live()] == [sid]
    assert Gated.setup_gate is not None
    Gated.setup_gate.set()
    await sessions(app).live()[0].ready.wait()
    await advance(app, TIMEOUT_S)
    assert Gated.torn_down == []
    assert await prompt(client, sid) == 200


async def test_a_request_waits_for_the_setup_then_gets_503(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    sid = await create(client, "slow", gated_setup=True)
    headers = {"X-Session-ID": sid}
    assert (await client.post("/ping", headers=headers)).status_code == 200  # during setup
    waiting = asyncio.create_task(client.get("/gated/prompt", headers=headers))
    await sessions(app).clock.sleepers(2)  # the reaper, and the request waiting for setup
    await advance(app, SETUP_WAIT_S - 0.01)
    assert not waiting.done()
    await advance(app, 0.01)
    r = await waiting
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "2" and r.headers["x-backend-state"] == "starting"
    assert "still running" in r.json()["detail"]
    waiting = asyncio.create_task(client.get("/gated/prompt", headers=headers))
    await sessions(app).clock.sleepers(2)
    assert Gated.setup_gate is not None
    Gated.setup_gate.set()  # no time passes: the request is answered when the setup ends
    r = await waiting
    assert r.status_code == 200 and r.json()[0]["text"] == "wait"


async def test_a_running_call_streams_a_keepalive_every_interval(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    sid = await create(client, "busy")
    running = await start_waiting_call(client, sid)
    await sessions(app).clock.sleepers(2)  # the reaper, and the stream waiting for the end
    for _ in range(2):
        await advance(app, KEEPALIVE_S)  # returns once the stream waits again
    await advance(app, KEEPALIVE_S - 0.01)
    Gated.call_gate.set()
    lines = (await running).text.split("\r\n")
    pings = [line for line in lines if line.startswith(":")]
    assert len(pings) == 2 and all(p.startswith(": ping - ") for p in pings), lines
    assert lines[0] == "event: task_id" and "event: end" in lines[lines.index(pings[-1]) :]


async def test_a_finished_calls_result_lingers_for_reconnects_then_is_forgotten(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    sid = await create(client, "done")
    headers = {"X-Session-ID": sid}
    assert Gated.call_gate is not None
    Gated.call_gate.set()
    first = await client.post("/gated/call", headers=headers, json={"name": "wait", "input": {}})
    task_id = first.text.split("\r\n")[1].removeprefix("data: ")
    again = {"name": "wait", "input": {}, "task_id": task_id}

    async def reconnect() -> str:
        return (await client.post("/gated/call", headers=headers, json=again)).text

    assert await reconnect() == first.text
    await advance(app, LINGER_S - 0.01)
    assert await reconnect() == first.text
    await advance(app, 0.01)
    assert await reconnect() == "event: error\r\ndata: unknown task_id\r\n\r\n"
