"""Plain ASGI middleware: request body limit and bare-path routing.

Both work on the raw ASGI scope so they cost nothing on the hot path beyond a dict
lookup, and neither buffers a body that fits the limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Endpoints that live under /{env_name}/ and that clients also call bare.
ENV_SCOPED = frozenset(
    {
        *("tools", "splits", "tasks", "num_tasks", "task", "task_range"),
        *("prompt", "messages", "task_tools", "call", "score_group"),
    }
)


class ClientCompatMiddleware:
    """Accept requests the way ORS clients and curl users send them.

    * `/tools`, `/call`, ... reach the default environment (the openreward client calls
      bare paths). The path is rewritten in place instead of redirected: no extra round
      trip, and clients that do not follow redirects work too.
    * Every body is JSON: one sent without a content type, or as curl's default
      form type, is read as JSON instead of failing with a confusing schema error.
    """

    def __init__(self, app: ASGIApp, default_env: Callable[[], str]) -> None:
        self.app = app
        self.default_env = default_env

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if path.strip("/") in ENV_SCOPED:
                scope = dict(scope, path=f"/{self.default_env()}/{path.strip('/')}")
                scope["raw_path"] = scope["path"].encode()
            if scope["method"] == "POST":
                scope = _as_json_body(scope)
        await self.app(scope, receive, send)


def _as_json_body(scope: Scope) -> Scope:
    headers = scope["headers"]
    kept = [(k, v) for k, v in headers if k != b"content-type"]
    ctype = next((v for k, v in headers if k == b"content-type"), b"")
    if ctype and not ctype.startswith(b"application/x-www-form-urlencoded"):
        return scope
    return dict(scope, headers=[*kept, (b"content-type", b"application/json")])


class BodyLimitMiddleware:
    """413 for a body larger than `max_bytes`, whether it declares its length or not."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        seen = 0
        too_large = False

        async def counting_receive() -> Message:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    too_large = True
                    return {"type": "http.disconnect"}
            return message

        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if too_large and not started:
                started = True
                await self._reject(send)
                return
            if message["type"] == "http.response.start":
                started = True
            if not too_large:
                await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not too_large:
                raise
        if too_large and not started:
            await self._reject(send)

    async def _reject(self, send: Send) -> None:
        body = json.dumps({"detail": f"request body exceeds {self.max_bytes} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
