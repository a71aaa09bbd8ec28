"""Which ORS client sent a request, where the answer depends on it.

The `openreward` client says so in its User-Agent (`openreward-sdk/VERSION`). Two of
its conventions differ from other clients': it renders an `ok: false` answer as
`reason: error` itself, and with `environments.get(DEPLOYMENT, variant=ENV)` it sends
the deployment's name in `X-Deployment` and the environment in the path.
"""

from __future__ import annotations

OPENREWARD_USER_AGENT = "openreward-sdk/"


def is_openreward(user_agent: str | None) -> bool:
    """Whether the request came from the `openreward` client (and so TRL's adapter)."""
    return (user_agent or "").startswith(OPENREWARD_USER_AGENT)
