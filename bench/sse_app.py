"""The app `bench/sse_response.py` measures: one route per SSE response, the same stream.

Both answer a tool call's stream the way orsbox does: a `task_id` event at once, then the
result when the (here: instant, awaited) call ends. `/lean` uses orsbox's own
`EventStreamResponse`; `/sse-starlette` uses `sse_starlette.EventSourceResponse`, the
library the design first asked for, with its default ping interval.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from orsbox.server.event_stream import EventStreamResponse

RESULT = json.dumps({"ok": True, "output": {"blocks": [{"type": "text", "text": "hi\n"}]}})


async def call() -> str:
    await asyncio.sleep(0)  # a call that ends at once, after one turn of the loop
    return RESULT


async def lean(request: Request) -> Response:
    await request.body()

    async def rest() -> list[dict[str, str]]:
        return [{"event": "end", "data": await call()}]

    return EventStreamResponse([{"event": "task_id", "data": "t1"}], rest, keepalive_s=10)


async def library(request: Request) -> Response:
    from sse_starlette import EventSourceResponse

    await request.body()

    async def events() -> AsyncIterator[dict[str, str]]:
        yield {"event": "task_id", "data": "t1"}
        yield {"event": "end", "data": await call()}

    return EventSourceResponse(events(), ping=10)


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


app = Starlette(
    routes=[
        Route("/lean", lean, methods=["POST"]),
        Route("/sse-starlette", library, methods=["POST"]),
        Route("/health", health),
    ]
)
