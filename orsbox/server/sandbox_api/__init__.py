"""The openreward sandbox API: containers a client creates and drives over HTTP.

`openreward`'s `SandboxesAPI` (and environments written with it) create a sandbox with
`POST /create_sandbox`, then run commands and move files in it by its id
(`X-Session-ID`). These sandboxes are started through the same `SandboxBackend` as the
sessions' ones, so they are the same hardened containers. `request` reads what a client
asks for, `manager` keeps the live sandboxes (owners, caps, reaping), `files` moves
files in chunks; the routes are `orsbox.server.routes.sandboxes`.
"""

from orsbox.server.sandbox_api.manager import SANDBOX_ID_PREFIX, ApiSandbox, SandboxManager

__all__ = ["SANDBOX_ID_PREFIX", "ApiSandbox", "SandboxManager"]
