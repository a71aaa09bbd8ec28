"""The ORS HTTP server: FastAPI app factory, sessions, routes. Uses the protocol,
authoring and sandbox packages; never a concrete sandbox backend directly."""

from orsbox.server.app import create_app

__all__ = ["create_app"]
