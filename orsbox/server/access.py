"""Access control: an optional API token in front of every endpoint but `/health`.

The token is accepted as `Authorization: Bearer <token>` or as `X-API-Key: <token>` (the
header the ors-sdk and openreward clients send from ORS_API_KEY / their api_key), and
compared in constant time. Checked in a plain ASGI layer before any routing, so an
unauthenticated request costs nothing else and learns nothing about what exists.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

OPEN_PATHS = frozenset({"/health"})

_DENIED = json.dumps(
    {
        "detail": "missing or wrong API token: send Authorization: Bearer <token> or X-API-Key: <token>"
    }
).encode()


def presented_token(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    for name, value in headers:
        if name == b"x-api-key":
            return value.strip()
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return value[7:].strip()
    return None


class TokenMiddleware:
    """`token` and each of `more` (the sandbox API's client tokens) are accepted alike."""

    def __init__(self, app: ASGIApp, token: str | None, more: tuple[str, ...] = ()) -> None:
        self.app = app
        self.tokens = [t.encode() for t in (token, *more) if t]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = presented_token(scope["headers"])
        if given is not None and any(hmac.compare_digest(given, t) for t in self.tokens):
            await self.app(scope, receive, send)
            return
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(_DENIED)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": _DENIED})
