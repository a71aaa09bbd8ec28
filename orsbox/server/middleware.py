"""Plain ASGI middleware: request body limit and environment routing.

Both work on the raw ASGI scope so they cost nothing on the hot path beyond a dict
lookup, and neither buffers a body that fits the limit.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orsbox.errors import OrsboxError
from orsbox.server.catalog import Catalog
from orsbox.server.clients import is_openreward
from orsbox.server.errors import status_of

# Endpoints that live under /{env_name}/ and that clients also call bare.
ENV_SCOPED = frozenset(
    {
        *("tools", "splits", "tasks", "num_tasks", "task", "task_range"),
        *("prompt", "messages", "task_tools", "call", "score_group"),
    }
)


class ClientCompatMiddleware:
    """Accept requests the way ORS clients and curl users send them.

    * `/tools`, `/call`, ... reach the environment that `X-Deployment` names, or the
      default one without the header (the openreward client calls bare paths and names
      the environment only in that header; `Catalog.resolve` has the rules). The path
      is rewritten in place instead of redirected: no extra round trip, and clients
      that do not follow redirects work too. `/{env}/...` with a header naming another
      served environment is a 400 (but not from the openreward client, whose header
      then names the deployment of which the path's environment is a variant), one
      naming none a 404 for a bare path.
    * Every body is JSON: one sent without a content type, or as curl's default
      form type, is read as JSON instead of failing with a confusing schema error.
    """

    def __init__(self, app: ASGIApp, catalog: Catalog) -> None:
        self.app = app
        self.catalog = catalog

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                scope = self._route(scope)
            except OrsboxError as e:
                await send_json(send, status_of(e), e.message)
                return
            if scope["method"] == "POST":
                scope = _as_json_body(scope)
        await self.app(scope, receive, send)

    def _route(self, scope: Scope) -> Scope:
        """The scope with a bare path pointed at its environment; raises for a header
        that contradicts the path or names nothing served."""
        parts = scope["path"].strip("/").split("/")
        deployment = header(scope, b"x-deployment")
        if len(parts) == 1 and parts[0] in ENV_SCOPED:
            env = self.catalog.resolve(None, deployment)
            scope = dict(scope, path=f"/{env}/{parts[0]}")
            scope["raw_path"] = scope["path"].encode()
        elif deployment and self._names_served(parts):  # an unknown one: the route's 404
            variant = is_openreward(header(scope, b"user-agent"))
            self.catalog.resolve(parts[0], deployment, variant=variant)  # 400: two named
        return scope

    def _names_served(self, parts: list[str]) -> bool:
        """Whether the path is `/{env}/{endpoint}` for a served environment."""
        return len(parts) == 2 and parts[1] in ENV_SCOPED and parts[0].lower() in self.catalog.names


def header(scope: Scope, name: bytes) -> str:
    """The first value of a header, as Starlette's `Headers.get` reads it; "" for none."""
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return ""


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
        await send_json(send, 413, f"request body exceeds {self.max_bytes} bytes")


async def send_json(send: Send, status: int, detail: str) -> None:
    """An error answer in the server's one shape, `{"detail": ...}`, from middleware."""
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
