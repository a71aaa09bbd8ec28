"""Serving the app under uvicorn: `Server([...]).run()` (the ors-sdk spelling) and `serve()`.

Uvicorn's own SIGINT/SIGTERM handling drives a graceful shutdown, which runs the app's
shutdown phase and so tears down every session and its container.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG

from orsbox.authoring import Environment
from orsbox.settings import Settings


def log_config(level: str, log_format: str = "human") -> dict[str, Any]:
    """Uvicorn's logging setup plus the `orsbox` loggers on the same handler; with
    `log_format="json"` every line is one JSON object (`orsbox.monitoring.logs`)."""
    config = copy.deepcopy(LOGGING_CONFIG)
    if log_format == "json":
        for formatter in config["formatters"].values():
            formatter.clear()
            formatter["()"] = "orsbox.monitoring.logs.JsonFormatter"
    config["loggers"]["orsbox"] = {
        "handlers": ["default"],
        "level": level.upper(),
        "propagate": False,
    }
    return config


def serve(
    environments: Sequence[type[Environment]],
    settings: Settings | None = None,
    *,
    sandbox_backend: Any = None,
) -> None:
    from orsbox.server import create_app
    from orsbox.server.collector import settle_collector
    from orsbox.server.http_protocol import guarded_protocol
    from orsbox.server.secrets import install_stream_redaction

    settings = settings or Settings()
    install_stream_redaction()
    app = create_app(environments, settings, sandbox_backend=sandbox_backend)
    settle_collector()
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_config=log_config(settings.log_level, settings.log_format),
        log_level=settings.log_level,
        timeout_keep_alive=60,
        timeout_graceful_shutdown=30,
        http=guarded_protocol(settings.max_header_bytes, settings.request_read_timeout_s),
    )


class Server:
    """ors-sdk compatible: `Server([MyEnv]).run(port=8080)`."""

    def __init__(self, environments: Sequence[type[Environment]], **settings: Any) -> None:
        self.environments = list(environments)
        self.settings = Settings(**settings)

    @property
    def app(self) -> Any:
        from orsbox.server import create_app

        return create_app(self.environments, self.settings)

    def run(self, host: str | None = None, port: int | None = None) -> None:
        updates = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
        logging.getLogger("orsbox").info("starting orsbox")
        serve(self.environments, self.settings.model_copy(update=updates))
