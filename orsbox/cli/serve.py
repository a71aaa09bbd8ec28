"""`orsbox serve`: load environments, build missing images, run the ORS server until
SIGINT/SIGTERM."""

from __future__ import annotations

import logging
import os
from typing import Annotated

import typer

from orsbox.cli import backend_options as B
from orsbox.cli import dataset_options as D
from orsbox.cli import grading_options as G
from orsbox.errors import ManifestError
from orsbox.formats.registry import targets_help
from orsbox.monitoring.logs import LOG_FORMATS
from orsbox.sandbox.sizes import parse_size
from orsbox.server.owners import Owners
from orsbox.server.sandbox_api.session_url import advertise
from orsbox.settings import Settings

_DEFAULTS = Settings()

TARGETS_HELP = (
    "environments to serve: a folder with an orsbox.toml, path/to/file.py[:Class], "
    f"MODULE[:Class], a Docker image with a manifest inside, {targets_help()}; default: "
    "the bundled ones"
)


@D.with_dataset_options
@B.with_backend_options
def serve(
    targets: Annotated[
        list[str] | None, typer.Argument(help=TARGETS_HELP, show_default=False)
    ] = None,
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
    build: Annotated[bool, typer.Option(help="build missing images before serving")] = True,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
    log_format: Annotated[
        str, typer.Option(help="human, or json: one object a line with session and call ids")
    ] = _DEFAULTS.log_format,
    image_disk_budget: Annotated[
        str | None,
        typer.Option(
            help="disk the images this server pulls may take (e.g. 40G, 850M); past it the "
            "least recently used one no sandbox, setup snapshot or warm sandbox uses is "
            "removed [env: ORSBOX_IMAGE_DISK_BUDGET; default: unbounded]",
            show_default=False,
        ),
    ] = None,
    dataset: D.FormatOptions | None = None,
    backend_flags: B.BackendFlags | None = None,
    grading_errors: G.GradingErrors = None,
) -> None:
    """Serve ORS environments over HTTP (Python and manifest environments side by side).

    Without arguments, serves every bundled environment (math, coding, swe, terminal),
    building the sandbox images they need first. Requests name their environment by
    path (/coding/tools), `env_name` in /create, or the X-Deployment header (the
    openreward client's and TRL's way); one that names none reaches the only
    environment served, or ORSBOX_DEFAULT_ENVIRONMENT, and is otherwise a 400 listing
    them."""
    from orsbox.cli.build import ensure_images
    from orsbox.serving import serve as run_server
    from orsbox.targets import resolve_targets

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    if log_format not in LOG_FORMATS:
        raise typer.BadParameter(f"one of {', '.join(LOG_FORMATS)}", param_hint="--log-format")
    settings = _DEFAULTS.model_copy(
        update={
            "host": host,
            "port": port,
            "session_timeout_s": session_timeout,
            "setup_wait_s": setup_wait,
            "max_body_bytes": max_body,
            "log_level": log_level,
            "log_format": log_format,
        }
    )
    if image_disk_budget is not None:
        try:
            budget = parse_size(image_disk_budget)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--image-disk-budget") from None
        settings = settings.model_copy(update={"image_disk_budget": budget})
    if dataset is not None:  # --image-map (and ORSBOX_IMAGE_MAP) for the sandbox API too
        settings = settings.model_copy(update={"image_map": dataset.image_map.texts()})
    settings = B.with_backend(settings, backend_flags)
    settings = G.with_grading_errors(settings, grading_errors)
    try:  # image targets and missing images: on the engine the sandboxes will run on
        environments = resolve_targets(targets or [], dataset, settings.backend)
    except ManifestError as e:
        raise typer.BadParameter(str(e), param_hint="TARGETS") from e
    if build:
        ensure_images(environments, settings.backend)
    advertise_sandbox_api(settings)
    run_server(environments, settings)


def advertise_sandbox_api(settings: Settings) -> None:
    """Point openreward environments served here at this server's sandbox API
    (`OPENREWARD_SESSION_URL`, unless the operator set it: `session_url`)."""
    if advertise(settings) is None:
        return
    # Each session of an openreward environment is handed a key of its own in its
    # secrets (`orsbox.server.owners`); an environment that makes its client without it,
    # `AsyncOpenReward(api_key=None)`, falls back to this one: the server's key, whose
    # sandboxes are counted apart from every client token's.
    key = Owners.from_settings(settings).server_key
    if key is not None:
        os.environ.setdefault("OPENREWARD_API_KEY", key)
