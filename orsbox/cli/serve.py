"""`orsbox serve`: load environments and run the ORS server until SIGINT/SIGTERM."""

from __future__ import annotations

from typing import Annotated

import typer

from orsbox.authoring.loading import load_environments
from orsbox.errors import ManifestError
from orsbox.settings import Settings

_DEFAULTS = Settings()


def serve(
    targets: Annotated[
        list[str],
        typer.Argument(help="environments: MODULE:Class, path/to/file.py[:Class], or MODULE"),
    ],
    host: Annotated[str, typer.Option(help="address to bind")] = _DEFAULTS.host,
    port: Annotated[int, typer.Option(help="port to listen on")] = _DEFAULTS.port,
    session_timeout: Annotated[
        float, typer.Option(help="seconds of inactivity before a session is reaped")
    ] = _DEFAULTS.session_timeout_s,
    setup_wait: Annotated[
        float, typer.Option(help="seconds a request waits for setup before 503")
    ] = _DEFAULTS.setup_wait_s,
    max_body: Annotated[
        int, typer.Option(help="largest accepted request body, in bytes")
    ] = _DEFAULTS.max_body_bytes,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    """Serve ORS environments over HTTP."""
    from orsbox.runner import serve as run_server

    try:
        environments = load_environments(targets)
    except ManifestError as e:
        raise typer.BadParameter(str(e)) from e
    settings = _DEFAULTS.model_copy(
        update={
            "host": host,
            "port": port,
            "session_timeout_s": session_timeout,
            "setup_wait_s": setup_wait,
            "max_body_bytes": max_body,
            "log_level": log_level,
        }
    )
    run_server(environments, settings)
