"""CLI flags for the sandbox backend, derived from `DockerConfig`'s fields (their help is
the field's description), so the flags and ORSBOX_BACKEND never drift apart."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from orsbox.sandbox.config import DockerConfig, with_engine_options
from orsbox.settings import Settings

if TYPE_CHECKING:
    from orsbox.sandbox.base import SandboxBackend

_FIELDS = DockerConfig.model_fields

Runtime = Annotated[
    str | None,
    typer.Option(help=_FIELDS["runtime"].description, show_default=False),
]
Engine = Annotated[
    str | None,
    typer.Option(help=_FIELDS["engine"].description, show_default=False),
]


def with_backend(settings: Settings, runtime: str | None, engine: str | None) -> Settings:
    """`settings` with the flags given laid over its Docker backend config."""
    backend = with_engine_options(settings.backend, runtime=runtime, engine=engine)
    return (
        settings
        if backend is settings.backend
        else settings.model_copy(update={"backend": backend})
    )


def cli_backend() -> SandboxBackend:
    """The configured backend (ORSBOX_BACKEND), for a command that lists or removes
    sandboxes; it starts none, so closing it touches no one's sandboxes."""
    from orsbox.sandbox import create_backend

    return create_backend(Settings().backend, server_id=f"cli-{os.getpid()}")
