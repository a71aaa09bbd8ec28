"""The ORS HTTP server: FastAPI app factory, sessions, routes. Uses the protocol,
authoring and sandbox packages; never a concrete sandbox backend directly.

`create_app` is imported on first use (PEP 562): the command line imports
`orsbox.server.cells` for every command, and FastAPI costs about 0.4 s of CPU to import,
which only `serve` and `run` need."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orsbox.server.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from orsbox.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
