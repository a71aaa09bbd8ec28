"""Access control: an optional API token in front of every endpoint but `/health`.

The token is accepted as `Authorization: Bearer <token>` or as `X-API-Key: <token>` (the
header the ors-sdk and openreward clients send from ORS_API_KEY / their api_key), and
compared in constant time. Checked in a plain ASGI layer before any routing, so an
unauthenticated request costs nothing else and learns nothing about what exists.

A browser cannot send a header, so the status page (`/`, `/ui/...`, read-only GETs) also
takes the token once as `?token=`: the answer is a redirect to the same page without
it that sets a cookie derived from the token (an HMAC, never the token itself; HttpOnly,
SameSite=Strict), and the cookie opens the status page — only the status page — after.

A session's key (`orsbox.server.owners`: what an environment's own openreward client
presents), and the server's key, open only `key_paths`, the sandbox API's, and a
session's only while its session lives; on `/ping` and `/delete_session`, which ORS
sessions share with it, only for a sandbox id (`key_prefix`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from orsbox.server.owners import Owners

OPEN_PATHS = frozenset({"/health"})
UI_COOKIE = "orsbox_ui"

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
    """`token` and each of `more` (the sandbox API's client tokens) are accepted alike;
    a key of `owners` (a live session's, the server's) on `key_paths` only, and on
    `shared_paths` for an `X-Session-ID` starting with `key_prefix`."""

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        more: tuple[str, ...] = (),
        open_paths: frozenset[str] = OPEN_PATHS,
        owners: Owners | None = None,
        key_paths: frozenset[str] = frozenset(),
        shared_paths: frozenset[str] = frozenset(),
        key_prefix: bytes = b"",
    ) -> None:
        self.app = app
        self.tokens = [t.encode() for t in (token, *more) if t]
        self.open_paths = open_paths
        self.owners = owners
        self.key_paths = key_paths
        self.shared_paths = shared_paths
        self.key_prefix = key_prefix
        self.ui_cookie = ui_cookie_value(self.tokens[0]) if self.tokens else b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        given = presented_token(scope["headers"])
        if given is not None and (self._valid(given) or self._session_key(scope, given)):
            await self.app(scope, receive, send)
            return
        if is_status_page(scope):
            if hmac.compare_digest(_cookie(scope["headers"]), self.ui_cookie):
                await self.app(scope, receive, send)
                return
            if self._valid(_query_token(scope)):
                await self._set_cookie_and_return(scope, send)
                return
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(_DENIED)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": _DENIED})

    def _valid(self, given: bytes) -> bool:
        return bool(given) and any(hmac.compare_digest(given, t) for t in self.tokens)

    def _session_key(self, scope: Scope, given: bytes) -> bool:
        if self.owners is None:
            return False
        path = scope["path"]
        if path in self.shared_paths:
            sid = dict(scope["headers"]).get(b"x-session-id", b"").strip()
            if not sid.startswith(self.key_prefix):
                return False
        elif path not in self.key_paths:
            return False
        return self.owners.key_owner(given) is not None

    async def _set_cookie_and_return(self, scope: Scope, send: Send) -> None:
        cookie = f"{UI_COOKIE}={self.ui_cookie.decode()}; HttpOnly; SameSite=Strict; Path=/"
        headers = [
            (b"location", scope["path"].encode()),
            (b"set-cookie", cookie.encode()),
            (b"content-length", b"0"),
            (b"cache-control", b"no-store"),
        ]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def ui_cookie_value(token: bytes) -> bytes:
    """What the status page's cookie holds: derived from the token, not the token."""
    return hmac.new(token, b"orsbox status page", hashlib.sha256).hexdigest().encode()


def is_status_page(scope: Scope) -> bool:
    path: str = scope["path"]
    return scope["method"] == "GET" and (path == "/" or path.startswith("/ui/"))


def _cookie(headers: list[tuple[bytes, bytes]]) -> bytes:
    for name, value in headers:
        if name == b"cookie":
            morsel = SimpleCookie(value.decode("latin-1")).get(UI_COOKIE)
            if morsel is not None:
                return morsel.value.encode()
    return b"-"


def _query_token(scope: Scope) -> bytes:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[0].encode() if values else b""
