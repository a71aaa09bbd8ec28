"""Which server the openreward environments served here send their sandboxes to.

The `openreward` client an environment's tools use reads its sandbox server from
`OPENREWARD_SESSION_URL`. `orsbox serve` points it at itself unless the operator set it
(a sandbox provider elsewhere), and says at startup which URL that is, with a warning
when an inherited one points at another server: a shell that exported it for a client
of a second server sends this one's sandboxes there, and the first sign was a
`MaxRetriesError ... Cannot connect` from inside a tool call.
"""

from __future__ import annotations

import logging
import os
from urllib.parse import urlsplit

from orsbox.settings import Settings

SESSION_URL_ENV = "OPENREWARD_SESSION_URL"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""})

log = logging.getLogger("orsbox.sandbox_api")


def own_url(settings: Settings) -> str:
    """This server's URL as a local client reaches it."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.port}"


def points_here(url: str, settings: Settings) -> bool:
    """Whether `url` reaches this server (any loopback spelling of its host and port)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    local = host in LOCAL_HOSTS and settings.host in LOCAL_HOSTS
    return port == settings.port and (local or host == settings.host.lower())


def advertise(settings: Settings) -> str | None:
    """Point `OPENREWARD_SESSION_URL` here unless it is set; the URL the environments
    will use, or None when the sandbox API is off."""
    if not settings.sandbox_api:
        return None
    return os.environ.setdefault(SESSION_URL_ENV, own_url(settings))


def log_session_url(settings: Settings) -> None:
    """The startup lines: where openreward environments' sandboxes go, and a warning
    when that is not this server."""
    url = os.environ.get(SESSION_URL_ENV)
    if not settings.sandbox_api or url is None:
        return
    log.info("openreward environments served here create their sandboxes at %s", url)
    if not points_here(url, settings):
        log.warning(
            "%s=%s (inherited) is not this server (%s): openreward environments served "
            "here will create their sandboxes there; unset it to use this server's",
            SESSION_URL_ENV,
            url,
            own_url(settings),
        )


def log_client_url(settings: Settings) -> None:
    """What an `openreward` client (TRL's `OpenRewardSpec` is one) must be given to
    reach this server: it puts `sessions.` before the host of the URL it is handed
    (`sessions.localhost` resolves nowhere) unless `OPENREWARD_SESSION_URL` is set."""
    log.info(
        "openreward clients (TRL's OpenRewardSpec): export %s=%s, then "
        "OpenRewardSpec(%r, env_name=NAME)",
        SESSION_URL_ENV,
        own_url(settings),
        own_url(settings),
    )
