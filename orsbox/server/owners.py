"""Who sent a request: the client that owns the sessions and sandboxes it creates.

With tokens configured (`ORSBOX_TOKEN`, `ORSBOX_SANDBOX_TOKENS`), each token is one
client, named by where the operator configured it (`token` for `ORSBOX_TOKEN`,
`sandbox-token-0` for the first of `ORSBOX_SANDBOX_TOKENS`): a name, never the token,
so it may go in container labels (`orsbox ps`), logs and errors.
A client sees and ends only its own sessions and sandboxes; anyone else's answer as if
they did not exist. Without tokens, every request is the one client `ANYONE`, and
nothing is kept apart (one user's server).

An environment served here that asks for a sandbox (an openreward environment's
`AsyncOpenReward().sandbox(...)`) does so over HTTP, from inside the server, with the
key it was handed in its secrets. So each such session is handed a key of its own
(`mint`): it names the session's client, and the sandbox counts against the client
whose session caused it, whichever ORS client that is (ors-sdk sends no key of its
own to hand on). A session key opens only the sandbox API, and only while its session
lives. An environment that ignores its secrets and makes its client from the process's
`OPENREWARD_API_KEY` gets the server's key (`server_key`, which `orsbox serve` exports):
its sandboxes are the client `server`'s, counted apart from every token's.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import SecretStr

from orsbox.server.access import presented_token
from orsbox.settings import Settings

ANYONE = "-"  # the one client of a server without tokens
SERVER = "server"  # the client of the server's own key (`Owners.server_key`)
SESSION_KEY_PREFIX = "orsbox-session-"
SERVER_KEY_PREFIX = "orsbox-server-"
# The secrets an openreward environment reads its client's key from: the `openreward`
# client sends both (`augment_secrets_with_api_key`), ors-sdk neither.
KEY_SECRETS = ("api_key", "OPENREWARD_API_KEY")


@dataclass(frozen=True)
class SessionKey:
    owner: str
    sid: str


class Owners:
    """The configured clients, and the keys handed to sessions on their behalf."""

    def __init__(self, tokens: Sequence[tuple[str, SecretStr]]) -> None:
        self._tokens = [(name, token.get_secret_value().encode()) for name, token in tokens]
        self._keys: dict[bytes, SessionKey] = {}
        self._by_session: dict[str, bytes] = {}
        self._server_key = _server_key(self._tokens[0][1]) if self._tokens else b""

    @classmethod
    def from_settings(cls, settings: Settings) -> Owners:
        named = [("token", settings.token)] if settings.token is not None else []
        named += [(f"sandbox-token-{i}", t) for i, t in enumerate(settings.sandbox_tokens)]
        return cls([(name, token) for name, token in named if token.get_secret_value()])

    @property
    def apart(self) -> bool:
        """Whether clients are kept apart (tokens are configured)."""
        return bool(self._tokens)

    def of(self, headers: list[tuple[bytes, bytes]]) -> str:
        """The client that sent a request with these headers (the token middleware has
        let only known tokens and session keys through)."""
        if not self._tokens:
            return ANYONE
        given = presented_token(headers) or b""
        key = self.key_owner(given)
        if key is not None:
            return key
        for name, token in self._tokens:
            if hmac.compare_digest(given, token):
                return name
        return ANYONE

    # -- session keys ---------------------------------------------------------------------
    def mint(self, owner: str, sid: str) -> str:
        """A key for session `sid`'s environment that acts as `owner` in the sandbox API."""
        self.revoke(sid)
        key = SESSION_KEY_PREFIX + secrets.token_urlsafe(32)
        self._keys[key.encode()] = SessionKey(owner, sid)
        self._by_session[sid] = key.encode()
        return key

    def revoke(self, sid: str) -> None:
        """The session is gone (its teardown done): its key opens nothing any more."""
        key = self._by_session.pop(sid, None)
        if key is not None:
            del self._keys[key]

    def session_key(self, given: bytes) -> SessionKey | None:
        if not given.startswith(SESSION_KEY_PREFIX.encode()):
            return None
        return self._keys.get(given)

    @property
    def server_key(self) -> str | None:
        """The key of the client `SERVER`, for environments that take theirs from the
        process (`OPENREWARD_API_KEY`) rather than their secrets; None without tokens.
        Derived from the first token, so every process of one configuration agrees."""
        return self._server_key.decode() or None

    def key_owner(self, given: bytes) -> str | None:
        """The client a session key or the server's key acts for; None for anything else
        (a token, or nothing)."""
        key = self.session_key(given)
        if key is not None:
            return key.owner
        if self._server_key and hmac.compare_digest(given, self._server_key):
            return SERVER
        return None


def _server_key(first_token: bytes) -> bytes:
    digest = hmac.new(first_token, b"orsbox server key for openreward environments", hashlib.sha256)
    return (SERVER_KEY_PREFIX + digest.hexdigest()).encode()


def with_session_key(secrets: dict[str, SecretStr], key: str) -> dict[str, SecretStr]:
    """`secrets` with the session's key where an openreward environment looks for its
    client's key (replacing what the client sent: the client's own token never reaches
    the environment's code)."""
    return {**secrets, **{name: SecretStr(key) for name in KEY_SECRETS}}
