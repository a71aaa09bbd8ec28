"""CLI flags for the sandbox backend, derived from `DockerConfig`'s fields (their help is
the field's description), so the flags and ORSBOX_BACKEND never drift apart."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from orsbox.sandbox.config import DockerConfig
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
    given = {k: v for k, v in {"runtime": runtime, "engine": engine}.items() if v is not None}
    if not given:
        return settings
    base = settings.backend if isinstance(settings.backend, DockerConfig) else DockerConfig()
    return settings.model_copy(update={"backend": base.model_copy(update=given)})


def cli_backend() -> SandboxBackend:
    """The configured backend (ORSBOX_BACKEND), for a command that lists or removes
    sandboxes; it starts none, so closing it touches no one's sandboxes."""
    from orsbox.sandbox import create_backend

    return create_backend(Settings().backend, server_id=f"cli-{os.getpid()}")
