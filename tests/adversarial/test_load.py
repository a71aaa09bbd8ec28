"""Load: 64 sessions, each with its own container, make their calls all at once (CI: 20
each; `pytest -m full_matrix`: 50 each). Every call returns exactly its own output; none
fails, none leaks into another."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx
import pytest

from tests.servers import LiveServer

pytestmark = pytest.mark.docker

SESSIONS = 64
CI_CALLS, FULL_CALLS = 20, 50
DEADLINE_S = 240


async def sse_result(response: httpx.Response) -> dict:
    events, name, data = [], None, []
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif line == "" and name is not None:
            events.append((name, "\n".join(data)))
            name, data = None, []
    assert events and events[-1][0] == "end", events
    return json.loads("".join(d for n, d in events if n in ("chunk", "end")))


async def episode(client: httpx.AsyncClient, n: int, calls: int) -> list[str]:
    """Create a session, make the calls one after another; return what went wrong."""
    sid = f"load-{n}-{uuid.uuid4().hex[:8]}"
    headers = {"X-Session-ID": sid}
    r = await client.post("/create", headers=headers, json={"env_name": "hostile", "task_spec": {}})
    assert r.status_code == 200, r.text
    wrong = []
    try:
        for i in range(calls):
            token = uuid.uuid4().hex
            body = {"name": "bash", "input": {"command": f"echo {sid} {i} {token} $(({i} * {n}))"}}
            async with client.stream("POST", "/hostile/call", headers=headers, json=body) as resp:
                result = await sse_result(resp)
            text = result["output"]["blocks"][0]["text"] if result.get("ok") else result
            if text != f"{sid} {i} {token} {i * n}\n":
                wrong.append(f"{sid} call {i}: {text!r}")
    finally:
        await client.post("/delete", headers=headers)
    return wrong


async def run_all(url: str, calls: int) -> list[str]:
    limits = httpx.Limits(max_connections=SESSIONS + 8, max_keepalive_connections=SESSIONS + 8)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        results = await asyncio.gather(*(episode(client, n, calls) for n in range(SESSIONS)))
    return [problem for problems in results for problem in problems]


@pytest.mark.parametrize(
    "calls", [CI_CALLS, pytest.param(FULL_CALLS, marks=pytest.mark.full_matrix)]
)
def test_64_sessions_make_their_calls_at_once(hostile_server: LiveServer, calls: int) -> None:
    started = time.monotonic()
    wrong = asyncio.run(asyncio.wait_for(run_all(hostile_server.url, calls), DEADLINE_S))
    took = time.monotonic() - started
    assert wrong == [], wrong[:5]
    print(f"{SESSIONS * calls} calls in {took:.1f}s")
    assert "internal error" not in hostile_server.log()
